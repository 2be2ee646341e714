package server

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A fast body check is a request body schema compiled, at start-up, into a plain predicate over
// the decoded body (nil, bool, string, json.Number, []any, map[string]any). It answers true only
// for a body that the body's compiled JSON Schema (jsonschema.Schema.Validate) accepts; false
// means "not decided here", and the body is then validated by jsonschema, whose errors are the
// response. The predicate exists because jsonschema validates a value by building a scope, an
// instance location and evaluation bookkeeping per keyword and per value, allocated per request:
// for a 100-check authorization batch that walk was about a fifth of the request's CPU, while the
// schema itself needs a few comparisons per member. No library here compiles a 2020-12 schema into
// such a predicate, so it is written out for the keywords the request bodies use, and nothing
// else: a schema with any other keyword gets no predicate at all.
//
// The predicate is built from two views of the same schema: the JSON tree as compileBodies gave
// it to the compiler (inlineSchemaRefs's output), whose keywords must all be known below, and the
// *jsonschema.Schema compiled from it, whose values are used (the very bounds, the very regexp,
// the very format function jsonschema applies), and which must hold nothing that is not
// reproduced here.

// fastTypes is a set of JSON types, as the "type" keyword names them.
type fastTypes uint8

const (
	fastNull fastTypes = 1 << iota
	fastBoolean
	fastNumber
	fastInteger
	fastString
	fastArray
	fastObject
)

var fastTypeNames = map[string]fastTypes{
	"null": fastNull, "boolean": fastBoolean, "number": fastNumber, "integer": fastInteger,
	"string": fastString, "array": fastArray, "object": fastObject,
}

// fastSchema is one schema of a fast body check. Bounds of -1 are absent.
type fastSchema struct {
	types fastTypes // 0: any type

	// enum and const values: strings, booleans and null only.
	enum     []any
	hasEnum  bool
	constant any
	hasConst bool
	// format is the compiled schema's format function itself (nil: not asserted).
	format func(any) error

	// objects
	props        []fastProp
	propIndex    map[string]*fastSchema // for objects with many properties
	required     []string
	noAdditional bool        // additionalProperties: false
	additional   *fastSchema // additionalProperties as a schema
	minProps     int
	maxProps     int

	// arrays
	items    *fastSchema
	minItems int
	maxItems int

	// strings
	minLength int
	maxLength int
	pattern   *regexp.Regexp
	// match is pattern's matcher: its automaton (validate_pattern.go) or, without one, pattern.
	match interface {
		MatchString(string) bool
		Match([]byte) bool
	}

	// numbers
	minimum, maximum, exclusiveMinimum, exclusiveMaximum *big.Rat
	hasBounds                                            bool

	allOf []*fastSchema
}

type fastProp struct {
	name   string
	schema *fastSchema
}

// newFastSchema builds one schema of a fast check; ok is false when node or s uses anything not
// reproduced here.
func newFastSchema(node any, s *jsonschema.Schema) (*fastSchema, bool) {
	obj, isObj := node.(map[string]any)
	if !isObj || s == nil || s.DraftVersion < 2020 || !fastCompiledSupported(s) {
		return nil, false
	}
	for k := range obj {
		if !fastKeyword(k) {
			return nil, false
		}
	}
	f := &fastSchema{minProps: -1, maxProps: -1, minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			t, ok := fastTypeNames[name]
			if !ok {
				return nil, false
			}
			f.types |= t
		}
	}
	if s.Enum != nil {
		for _, e := range s.Enum.Values {
			if !fastScalar(e) {
				return nil, false
			}
		}
		f.enum, f.hasEnum = s.Enum.Values, true
	}
	if s.Const != nil {
		if !fastScalar(*s.Const) {
			return nil, false
		}
		f.constant, f.hasConst = *s.Const, true
	}
	if s.Format != nil {
		f.format = s.Format.Validate
	}
	if len(s.Properties) > 0 {
		nodes, _ := obj["properties"].(map[string]any)
		for name, ps := range s.Properties {
			p, ok := newFastSchema(nodes[name], ps)
			if !ok {
				return nil, false
			}
			f.props = append(f.props, fastProp{name, p})
		}
		if len(f.props) > 8 {
			f.propIndex = make(map[string]*fastSchema, len(f.props))
			for _, p := range f.props {
				f.propIndex[p.name] = p.schema
			}
		}
	}
	f.required = s.Required
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		f.noAdditional = !a
	case *jsonschema.Schema:
		var ok bool
		if f.additional, ok = newFastSchema(obj["additionalProperties"], a); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	if s.Items2020 != nil {
		var ok bool
		if f.items, ok = newFastSchema(obj["items"], s.Items2020); !ok {
			return nil, false
		}
	}
	if len(s.AllOf) > 0 {
		nodes, _ := obj["allOf"].([]any)
		if len(nodes) != len(s.AllOf) {
			return nil, false
		}
		for i, sub := range s.AllOf {
			a, ok := newFastSchema(nodes[i], sub)
			if !ok {
				return nil, false
			}
			f.allOf = append(f.allOf, a)
		}
	}
	if s.Pattern != nil {
		// jsonschema compiles patterns with its regexp engine: Go's regexp unless the compiler was
		// given another (UseRegexpEngine). Only the former is reproduced, by using its very value.
		re, ok := s.Pattern.(*regexp.Regexp)
		if !ok {
			return nil, false
		}
		f.pattern, f.match = re, re
		if m := newPatternMatcher(re); m != nil {
			f.match = m
		}
	}
	for _, b := range []struct {
		dst *int
		src *int
	}{
		{&f.minProps, s.MinProperties}, {&f.maxProps, s.MaxProperties},
		{&f.minItems, s.MinItems}, {&f.maxItems, s.MaxItems},
		{&f.minLength, s.MinLength}, {&f.maxLength, s.MaxLength},
	} {
		if b.src != nil {
			*b.dst = *b.src
		}
	}
	f.minimum, f.maximum = s.Minimum, s.Maximum
	f.exclusiveMinimum, f.exclusiveMaximum = s.ExclusiveMinimum, s.ExclusiveMaximum
	f.hasBounds = f.minimum != nil || f.maximum != nil || f.exclusiveMinimum != nil || f.exclusiveMaximum != nil
	return f, true
}

// fastKeyword reports whether a schema keyword is reproduced by a fast check or is an annotation
// that validates nothing.
func fastKeyword(k string) bool {
	switch k {
	case "type", "enum", "const", "format", "properties", "required", "additionalProperties",
		"minProperties", "maxProperties", "items", "minItems", "maxItems", "minLength",
		"maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		"allOf",
		"description", "title", "example", "examples", "default", "deprecated", "$comment",
		"readOnly", "writeOnly":
		return true
	}
	return strings.HasPrefix(k, "x-")
}

// fastCompiledSupported reports whether the compiled schema holds nothing that a fast check does
// not reproduce: a second guard, beside the keywords of the JSON tree.
func fastCompiledSupported(s *jsonschema.Schema) bool {
	return s.Bool == nil && s.ID == "" && s.Ref == nil && s.Anchor == "" && s.RecursiveRef == nil &&
		!s.RecursiveAnchor && s.DynamicRef == nil && s.DynamicAnchor == "" && s.Not == nil &&
		s.AnyOf == nil && s.OneOf == nil && s.If == nil && s.Then == nil && s.Else == nil &&
		s.PropertyNames == nil && s.PatternProperties == nil && s.Dependencies == nil &&
		s.DependentRequired == nil && s.DependentSchemas == nil && s.UnevaluatedProperties == nil &&
		!s.UniqueItems && s.Contains == nil && s.MinContains == nil && s.MaxContains == nil &&
		s.Items == nil && s.AdditionalItems == nil && s.PrefixItems == nil &&
		s.UnevaluatedItems == nil && s.ContentEncoding == nil && s.ContentMediaType == nil &&
		s.ContentSchema == nil && s.MultipleOf == nil && len(s.Extensions) == 0
}

// fastScalar reports whether an enum or const value is one a fast check compares exactly: a
// string, a boolean or null (numbers compare as rationals in jsonschema, left to it).
func fastScalar(v any) bool {
	switch v.(type) {
	case nil, bool, string:
		return true
	}
	return false
}

// valid reports whether v certainly satisfies the schema.
func (f *fastSchema) valid(v any) bool {
	switch x := v.(type) {
	case nil:
		if f.types != 0 && f.types&fastNull == 0 {
			return false
		}
	case bool:
		if f.types != 0 && f.types&fastBoolean == 0 {
			return false
		}
	case string:
		if f.types != 0 && f.types&fastString == 0 || !f.validString(x) {
			return false
		}
	case json.Number:
		if f.types != 0 && f.types&fastNumber == 0 && (f.types&fastInteger == 0 || !plainInteger(x)) {
			return false
		}
		if f.hasBounds && !f.validNumber(x) {
			return false
		}
	case []any:
		if f.types != 0 && f.types&fastArray == 0 || !f.validArray(x) {
			return false
		}
	case map[string]any:
		if f.types != 0 && f.types&fastObject == 0 || !f.validObject(x) {
			return false
		}
	default:
		return false // not a value the JSON decoder produces
	}
	if f.hasEnum && !fastOneOf(v, f.enum) {
		return false
	}
	if f.hasConst && !fastEqual(v, f.constant) {
		return false
	}
	if f.format != nil && f.format(v) != nil {
		return false
	}
	for _, a := range f.allOf {
		if !a.valid(v) {
			return false
		}
	}
	return true
}

func (f *fastSchema) validString(s string) bool {
	// A string of n bytes holds between n/4 and n code points: count them only when the byte
	// length does not settle both bounds.
	if f.maxLength >= 0 && len(s) > f.maxLength || f.minLength > 0 && len(s) < utf8.UTFMax*f.minLength {
		n := utf8.RuneCountInString(s)
		if f.minLength >= 0 && n < f.minLength || f.maxLength >= 0 && n > f.maxLength {
			return false
		}
	}
	return f.pattern == nil || f.match.MatchString(s)
}

// validNumber checks the numeric bounds exactly, as jsonschema does with rationals. A number
// with an exponent is left to jsonschema (false).
func (f *fastSchema) validNumber(n json.Number) bool {
	if strings.ContainsAny(string(n), "eE") {
		return false
	}
	var r *big.Rat
	for i, bound := range [4]*big.Rat{f.minimum, f.maximum, f.exclusiveMinimum, f.exclusiveMaximum} {
		if bound == nil {
			continue
		}
		var c int
		if bound.Sign() == 0 {
			c = decimalSign(string(n))
		} else {
			if r == nil {
				var ok bool
				if r, ok = new(big.Rat).SetString(string(n)); !ok {
					return false
				}
			}
			c = r.Cmp(bound)
		}
		switch {
		case i == 0 && c < 0, i == 1 && c > 0, i == 2 && c <= 0, i == 3 && c >= 0:
			return false
		}
	}
	return true
}

func (f *fastSchema) validArray(a []any) bool {
	if f.minItems >= 0 && len(a) < f.minItems || f.maxItems >= 0 && len(a) > f.maxItems {
		return false
	}
	if f.items != nil {
		for _, e := range a {
			if !f.items.valid(e) {
				return false
			}
		}
	}
	return true
}

func (f *fastSchema) validObject(o map[string]any) bool {
	if f.minProps >= 0 && len(o) < f.minProps || f.maxProps >= 0 && len(o) > f.maxProps {
		return false
	}
	for _, name := range f.required {
		if _, ok := o[name]; !ok {
			return false
		}
	}
	for name, e := range o {
		if p := f.property(name); p != nil {
			if !p.valid(e) {
				return false
			}
			continue
		}
		if f.noAdditional || f.additional != nil && !f.additional.valid(e) {
			return false
		}
	}
	return true
}

// property is the schema of a declared property, nil for an undeclared one.
func (f *fastSchema) property(name string) *fastSchema {
	if f.propIndex != nil {
		return f.propIndex[name]
	}
	for i := range f.props {
		if f.props[i].name == name {
			return f.props[i].schema
		}
	}
	return nil
}

// plainInteger reports whether a JSON number is written as an integer (no fraction, no
// exponent). Integers written otherwise (1.0, 1e2) are left to jsonschema.
func plainInteger(n json.Number) bool {
	s := strings.TrimPrefix(string(n), "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decimalSign is the sign of a JSON number written without an exponent: 0 when every digit is
// zero (-0 and 0.000 included), else -1 or 1 by its minus sign.
func decimalSign(s string) int {
	neg := strings.HasPrefix(s, "-")
	for i := 0; i < len(s); i++ {
		if s[i] >= '1' && s[i] <= '9' {
			if neg {
				return -1
			}
			return 1
		}
	}
	return 0
}

func fastOneOf(v any, values []any) bool {
	for _, e := range values {
		if fastEqual(v, e) {
			return true
		}
	}
	return false
}

// fastEqual compares v with an enum or const value that fastScalar accepted, as jsonschema's
// equality does for those: same type and same value.
func fastEqual(v, want any) bool {
	switch w := want.(type) {
	case nil:
		return v == nil
	case bool:
		b, ok := v.(bool)
		return ok && b == w
	case string:
		s, ok := v.(string)
		return ok && s == w
	}
	return false
}
