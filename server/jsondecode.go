package server

import (
	"encoding/json"
	"unicode/utf8"
)

// decodeJSONDocument decodes one JSON document into the generic form encoding/json gives an
// `any` with UseNumber: map[string]any (a repeated member: the last wins), []any, string,
// json.Number (the literal as written), bool and nil. ok is false when raw is not exactly one
// JSON document (surrounding white space allowed) or nests deeper than encoding/json allows.
//
// It gives what encoding/json gives, value for value (FuzzDecodeJSONDocument holds them
// equal), in a single pass without reflection: request bodies are decoded once, before
// validation, and a batch of 100 checks is 400 values. Strings with escapes, control
// characters or bytes that are not UTF-8 are handed to encoding/json itself, so that escapes,
// surrogates and replacement characters come out exactly as it makes them.
func decodeJSONDocument(raw []byte) (v any, ok bool) {
	d := jsonDecoder{raw: raw}
	d.space()
	v, ok = d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	if d.pos != len(d.raw) {
		return nil, false
	}
	return v, true
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// jsonDecoder reads raw from pos.
type jsonDecoder struct {
	raw []byte
	pos int
}

// space skips JSON white space.
func (d *jsonDecoder) space() {
	for d.pos < len(d.raw) {
		switch d.raw[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value reads one value at depth (the number of arrays and objects around it).
func (d *jsonDecoder) value(depth int) (any, bool) {
	if d.pos >= len(d.raw) {
		return nil, false
	}
	switch c := d.raw[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

// literal reads word.
func (d *jsonDecoder) literal(word string) bool {
	if len(d.raw)-d.pos < len(word) || string(d.raw[d.pos:d.pos+len(word)]) != word {
		return false
	}
	d.pos += len(word)
	return true
}

func (d *jsonDecoder) object(depth int) (any, bool) {
	if depth > maxJSONDepth {
		return nil, false
	}
	d.pos++ // {
	out := map[string]any{}
	d.space()
	if d.pos < len(d.raw) && d.raw[d.pos] == '}' {
		d.pos++
		return out, true
	}
	for {
		d.space()
		if d.pos >= len(d.raw) || d.raw[d.pos] != '"' {
			return nil, false
		}
		key, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if d.pos >= len(d.raw) || d.raw[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		d.space()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		out[key.(string)] = v
		d.space()
		if d.pos >= len(d.raw) {
			return nil, false
		}
		switch d.raw[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return out, true
		default:
			return nil, false
		}
	}
}

func (d *jsonDecoder) array(depth int) (any, bool) {
	if depth > maxJSONDepth {
		return nil, false
	}
	d.pos++ // [
	out := []any{}
	d.space()
	if d.pos < len(d.raw) && d.raw[d.pos] == ']' {
		d.pos++
		return out, true
	}
	for {
		d.space()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		d.space()
		if d.pos >= len(d.raw) {
			return nil, false
		}
		switch d.raw[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return out, true
		default:
			return nil, false
		}
	}
}

// string reads a string; one that is plain (printable UTF-8 without escapes) is copied as it
// is, any other is decoded by encoding/json.
func (d *jsonDecoder) string() (any, bool) {
	start := d.pos
	d.pos++ // "
	plain := true
	for d.pos < len(d.raw) {
		switch c := d.raw[d.pos]; {
		case c == '"':
			d.pos++
			body := d.raw[start+1 : d.pos-1]
			if plain && utf8.Valid(body) {
				return string(body), true
			}
			var s string
			if json.Unmarshal(d.raw[start:d.pos], &s) != nil {
				return nil, false
			}
			return s, true
		case c == '\\':
			plain = false
			d.pos += 2
		case c < 0x20:
			return nil, false
		default:
			d.pos++ // bytes past ASCII: checked with utf8.Valid at the end
		}
	}
	return nil, false
}

// number reads a number by JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *jsonDecoder) number() (any, bool) {
	start := d.pos
	if d.raw[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.raw) && d.raw[d.pos] == '0':
		d.pos++
	case d.pos < len(d.raw) && d.raw[d.pos] >= '1' && d.raw[d.pos] <= '9':
		d.digits()
	default:
		return nil, false
	}
	if d.pos < len(d.raw) && d.raw[d.pos] == '.' {
		d.pos++
		if !d.digits() {
			return nil, false
		}
	}
	if d.pos < len(d.raw) && (d.raw[d.pos] == 'e' || d.raw[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.raw) && (d.raw[d.pos] == '+' || d.raw[d.pos] == '-') {
			d.pos++
		}
		if !d.digits() {
			return nil, false
		}
	}
	return json.Number(d.raw[start:d.pos]), true
}

// digits reads one or more decimal digits; false when there is none.
func (d *jsonDecoder) digits() bool {
	start := d.pos
	for d.pos < len(d.raw) && d.raw[d.pos] >= '0' && d.raw[d.pos] <= '9' {
		d.pos++
	}
	return d.pos > start
}
