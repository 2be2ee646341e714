package server

import (
	"reflect"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A quick check of a JSON body against its compiled schema (validate.go), ahead of the JSON
// Schema validator: a walk of the compiled schema itself, for the keywords request bodies use
// (type, enum of strings, format, required, properties, additionalProperties, items,
// minItems/maxItems, minLength/maxLength, pattern, $ref, annotations). Its only answer that
// counts is "valid": it applies each keyword exactly as the validator does (the same compiled
// patterns and format functions, lengths in code points), and gives up on anything else —
// a number, an enum of other values, an invalid value. Then, and for every schema that uses
// any other keyword (quickSchemas refuses those at start-up), the validator decides and
// words the errors. So a body is never let through that the validator would refuse, and the
// common valid body (a batch of 100 checks: 400 values) costs a walk instead of the
// validator's per-value scopes, evaluation tracking and allocations.

// quickKeywords are the fields of jsonschema.Schema that quickValid applies or that only
// annotate; a schema with any other field set is left to the validator.
var quickKeywords = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true,
	"Bool": true, "Ref": true, "Types": true, "Enum": true, "Format": true,
	"Required": true, "Properties": true, "AdditionalProperties": true,
	"MinItems": true, "MaxItems": true, "Items2020": true,
	"MinLength": true, "MaxLength": true, "Pattern": true,
	"Title": true, "Description": true, "Default": true, "Comment": true,
	"ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
}

// quickSchema is a compiled schema that quickValid can apply, with its type names.
type quickSchema struct {
	*jsonschema.Schema
	// types are the JSON type names the schema allows (nil: any).
	types map[string]bool
	ref   *quickSchema
	// properties and additional (nil: any member allowed) follow the schema's.
	properties    map[string]*quickSchema
	additional    *quickSchema
	noAdditional  bool
	items         *quickSchema
	stringEnum    map[string]bool
	hasStringEnum bool
}

// quickSchemas returns the quick form of s, or nil when s or a schema it reaches uses a
// keyword quickValid does not apply (the body is then left to the validator alone).
func quickSchemas(s *jsonschema.Schema) *quickSchema {
	q, ok := buildQuick(s, map[*jsonschema.Schema]*quickSchema{})
	if !ok {
		return nil
	}
	return q
}

func buildQuick(s *jsonschema.Schema, seen map[*jsonschema.Schema]*quickSchema) (*quickSchema, bool) {
	if q, ok := seen[s]; ok {
		return q, true
	}
	if s.DraftVersion != 2020 {
		return nil, false
	}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && !quickKeywords[f.Name] && !v.Field(i).IsZero() {
			return nil, false
		}
	}
	if s.Format != nil && s.Format.Name == "regex" {
		return nil, false // the validator checks it with its own regexp engine
	}
	q := &quickSchema{Schema: s}
	seen[s] = q
	if s.Types != nil && !s.Types.IsEmpty() {
		q.types = map[string]bool{}
		for _, t := range s.Types.ToStrings() {
			q.types[t] = true
		}
	}
	if s.Enum != nil {
		q.stringEnum, q.hasStringEnum = map[string]bool{}, true
		for _, e := range s.Enum.Values {
			str, ok := e.(string)
			if !ok {
				return nil, false
			}
			q.stringEnum[str] = true
		}
	}
	var ok bool
	if s.Ref != nil {
		if q.ref, ok = buildQuick(s.Ref, seen); !ok {
			return nil, false
		}
	}
	if s.Items2020 != nil {
		if q.items, ok = buildQuick(s.Items2020, seen); !ok {
			return nil, false
		}
	}
	if len(s.Properties) > 0 {
		q.properties = make(map[string]*quickSchema, len(s.Properties))
		for name, p := range s.Properties {
			if q.properties[name], ok = buildQuick(p, seen); !ok {
				return nil, false
			}
		}
	}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		q.noAdditional = !a
	case *jsonschema.Schema:
		if q.additional, ok = buildQuick(a, seen); !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	return q, true
}

// quickValid reports whether v, a decoded JSON body (numbers as json.Number), certainly
// satisfies q; false means "ask the validator", not "invalid".
func quickValid(q *quickSchema, v any) bool {
	s := q.Schema
	if s.Bool != nil {
		return *s.Bool
	}
	var typ string
	switch v.(type) {
	case nil:
		typ = "null"
	case bool:
		typ = "boolean"
	case string:
		typ = "string"
	case []any:
		typ = "array"
	case map[string]any:
		typ = "object"
	default:
		return false // numbers (integer or not) and anything else: the validator's call
	}
	if q.types != nil && !q.types[typ] {
		return false
	}
	if q.hasStringEnum {
		str, ok := v.(string)
		if !ok || !q.stringEnum[str] {
			return false
		}
	}
	if s.Format != nil && s.Format.Validate(v) != nil {
		return false
	}
	if q.ref != nil && !quickValid(q.ref, v) {
		return false
	}
	switch v := v.(type) {
	case string:
		if s.MinLength != nil || s.MaxLength != nil {
			n := utf8.RuneCountInString(v)
			if (s.MinLength != nil && n < *s.MinLength) || (s.MaxLength != nil && n > *s.MaxLength) {
				return false
			}
		}
		if s.Pattern != nil && !s.Pattern.MatchString(v) {
			return false
		}
	case []any:
		if (s.MinItems != nil && len(v) < *s.MinItems) || (s.MaxItems != nil && len(v) > *s.MaxItems) {
			return false
		}
		if q.items != nil {
			for _, item := range v {
				if !quickValid(q.items, item) {
					return false
				}
			}
		}
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := v[name]; !ok {
				return false
			}
		}
		for name, member := range v {
			p := q.properties[name]
			switch {
			case p != nil:
				if !quickValid(p, member) {
					return false
				}
			case q.noAdditional:
				return false
			case q.additional != nil:
				if !quickValid(q.additional, member) {
					return false
				}
			}
		}
	}
	return true
}
