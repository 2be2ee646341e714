package server

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// A streamed body check is a fast body check (validate_fast.go) run over the body's JSON tokens
// instead of over the tree decodeJSONDocument builds. Building that tree (a map and six strings,
// boxed, per check) was a fifth of a 100-check authorization batch's CPU, and the fast check over
// it another tenth, for a tree that only the binding then reads. Bodies whose binding reads the
// bytes themselves (typedBodies, bind.go) are checked this way, and their tree is never built.
//
// The streamed check answers what the fast check answers on the tree of the same bytes, for the
// documents it is given (streamable): valid UTF-8 without \u escapes. It answers false (not
// decided here: the tree and jsonschema decide) for anything else it meets: a repeated member
// name (which the tree would resolve to its last value), a number with an exponent or of more
// than 308 characters (one numberRangeErrors might have to replace), and a schema with allOf,
// enum or const on a container, or a format on a value that is not a string.

// streamable reports whether raw is a body the streamed check may judge: what decodeJSONDocument
// reads with jsontext (valid UTF-8, no \u escape), with nothing for the text rule to mark
// (markNonText). (Numbers numberRangeErrors might replace are refused as they are read:
// mayHoldHugeNumber, which does not tell strings from numbers, holds for many an id.)
func streamable(raw []byte) bool {
	return utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`))
}

// streamDecoders recycles the streamed check's decoders (a decoder is a few hundred bytes of
// state); noInput is what a recycled decoder reads, so that it holds no request's bytes.
var (
	streamDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(noInput) }}
	noInput        = strings.NewReader("")
)

// validDocument reports whether raw is exactly one JSON document that certainly satisfies the
// schema (see streamable for the documents it decides).
func (f *fastSchema) validDocument(raw []byte) bool {
	dec := streamDecoders.Get().(*jsontext.Decoder)
	// Repeated names are refused by the decoder, so they end the check (false). A bytes.Buffer
	// is read in place, not copied.
	dec.Reset(bytes.NewBuffer(raw))
	ok := f.validTokens(dec)
	if ok {
		_, err := dec.ReadToken()
		ok = err == io.EOF
	}
	dec.Reset(noInput)
	streamDecoders.Put(dec)
	return ok
}

// canStream reports whether every schema of f can be checked over tokens: no allOf (a value
// read once cannot be given to several schemas), no enum or const but on scalars (checked by
// validTokens as it reads them).
func (f *fastSchema) canStream() bool {
	if f == nil {
		return true
	}
	if len(f.allOf) > 0 {
		return false
	}
	for _, p := range f.props {
		if !p.schema.canStream() {
			return false
		}
	}
	return f.additional.canStream() && f.items.canStream()
}

// validTokens reads the next JSON value of dec and reports whether it certainly satisfies f, as
// f.valid would on its decoded value. It may stop reading at the first doubt.
func (f *fastSchema) validTokens(dec *jsontext.Decoder) bool {
	switch dec.PeekKind() {
	case 'n':
		if _, err := dec.ReadToken(); err != nil {
			return false
		}
		return f.scalarOK(fastNull, nil)
	case 't', 'f':
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		return f.scalarOK(fastBoolean, tok.Bool())
	case '"':
		raw, err := dec.ReadValue()
		if err != nil {
			return false
		}
		s := raw[1 : len(raw)-1]
		if bytes.IndexByte(s, '\\') >= 0 {
			if s, err = jsontext.AppendUnquote(nil, raw); err != nil {
				return false
			}
		}
		return f.validStringBytes(s)
	case '0':
		raw, err := dec.ReadValue()
		if err != nil || len(raw) > 308 || bytes.ContainsAny(raw, "eE") {
			return false
		}
		n := json.Number(raw)
		if f.types != 0 && f.types&fastNumber == 0 && (f.types&fastInteger == 0 || !plainInteger(n)) {
			return false
		}
		if f.hasBounds && !f.validNumber(n) {
			return false
		}
		return !f.hasEnum && !f.hasConst && f.format == nil
	case '[':
		return f.validArrayTokens(dec)
	case '{':
		return f.validObjectTokens(dec)
	}
	return false
}

// scalarOK checks a null or a boolean, v, of type t against f's type, enum, const and format.
func (f *fastSchema) scalarOK(t fastTypes, v any) bool {
	if f.types != 0 && f.types&t == 0 {
		return false
	}
	if f.hasEnum && !fastOneOf(v, f.enum) || f.hasConst && !fastEqual(v, f.constant) {
		return false
	}
	return f.format == nil || f.format(v) == nil
}

// validStringBytes is valid's string case on the unquoted bytes s, without making a string of
// them unless a format needs one.
func (f *fastSchema) validStringBytes(s []byte) bool {
	if f.types != 0 && f.types&fastString == 0 {
		return false
	}
	if f.maxLength >= 0 && len(s) > f.maxLength || f.minLength > 0 && len(s) < utf8.UTFMax*f.minLength {
		n := utf8.RuneCount(s)
		if f.minLength >= 0 && n < f.minLength || f.maxLength >= 0 && n > f.maxLength {
			return false
		}
	}
	if f.pattern != nil && !f.match.Match(s) {
		return false
	}
	if f.hasEnum && !oneOfBytes(s, f.enum) || f.hasConst && !oneOfBytes(s, []any{f.constant}) {
		return false
	}
	return f.format == nil || f.format(string(s)) == nil
}

// oneOfBytes reports whether the string s is one of values (fastEqual's string case).
func oneOfBytes(s []byte, values []any) bool {
	for _, v := range values {
		if w, ok := v.(string); ok && w == string(s) {
			return true
		}
	}
	return false
}

func (f *fastSchema) validArrayTokens(dec *jsontext.Decoder) bool {
	if f.types != 0 && f.types&fastArray == 0 || f.hasEnum || f.hasConst || f.format != nil {
		return false
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	n := 0
	for dec.PeekKind() != ']' {
		if f.maxItems >= 0 && n >= f.maxItems {
			return false
		}
		if f.items != nil {
			if !f.items.validTokens(dec) {
				return false
			}
		} else if err := dec.SkipValue(); err != nil {
			return false
		}
		n++
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	return f.minItems < 0 || n >= f.minItems
}

func (f *fastSchema) validObjectTokens(dec *jsontext.Decoder) bool {
	if f.types != 0 && f.types&fastObject == 0 || f.hasEnum || f.hasConst || f.format != nil || len(f.required) > 64 {
		return false
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	var seen uint64 // bit i: required[i] met
	n := 0
	for dec.PeekKind() != '}' {
		raw, err := dec.ReadValue()
		if err != nil {
			return false
		}
		name := raw[1 : len(raw)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			if name, err = jsontext.AppendUnquote(nil, raw); err != nil {
				return false
			}
		}
		for i, r := range f.required {
			if r == string(name) {
				seen |= 1 << i
			}
		}
		n++
		switch p := f.propertyBytes(name); {
		case p != nil:
			if !p.validTokens(dec) {
				return false
			}
		case f.noAdditional:
			return false
		case f.additional != nil:
			if !f.additional.validTokens(dec) {
				return false
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return false
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	if f.minProps >= 0 && n < f.minProps || f.maxProps >= 0 && n > f.maxProps {
		return false
	}
	return seen == 1<<len(f.required)-1
}

// propertyBytes is property for a name given as bytes, without making a string of it.
func (f *fastSchema) propertyBytes(name []byte) *fastSchema {
	if f.propIndex != nil {
		return f.propIndex[string(name)]
	}
	for i := range f.props {
		if f.props[i].name == string(name) {
			return f.props[i].schema
		}
	}
	return nil
}

// streamedBody is a JSON body that its streamed check accepted: its bytes, never decoded whole.
type streamedBody []byte

// member is the decoded value (as decodeJSONDocument decodes it) of the body's top-level member
// name, or nil. Only that member is decoded.
func (b streamedBody) member(name string) any {
	dec := streamDecoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(noInput)
		streamDecoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		if tok.String() == name {
			v, _ := readJSONValue(dec)
			return v
		}
		if dec.SkipValue() != nil {
			return nil
		}
	}
	return nil
}
