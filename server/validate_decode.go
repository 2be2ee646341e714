package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// decodeJSONDocument decodes one JSON document, numbers as json.Number; ok is false when raw is not
// exactly one. encoding/json decides what is a document and, for text that is not valid UTF-8 or
// holds \u escapes, what it decodes to (validate_text.go relies on its U+FFFD replacements);
// valid UTF-8 without \u escapes, the usual body, is decoded with the tokenizer of the Go
// team's JSON v2 (jsontext), which builds the same values in about half the time (a third of the
// time decoding took, for a 100-check batch). A document jsontext refuses is judged by
// encoding/json again, so that what is accepted is exactly what encoding/json accepts.
func decodeJSONDocument(raw []byte) (v any, ok bool) {
	if utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`)) {
		// Duplicate names are allowed, the last one winning, as with encoding/json.
		dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
		if v, err := readJSONValue(dec); err == nil {
			if _, err := dec.ReadToken(); err == io.EOF {
				return v, true
			}
		}
	}
	return decodeJSONDocumentStd(raw)
}

// decodeJSONDocumentStd is decodeJSONDocument with encoding/json alone.
func decodeJSONDocumentStd(raw []byte) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

var errJSONKind = errors.New("server: unexpected JSON token")

// readJSONValue reads the next JSON value from dec as encoding/json would decode it into an
// any with UseNumber: nil, bool, string, json.Number, []any or map[string]any.
func readJSONValue(dec *jsontext.Decoder) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := name.String()
			if m[key], err = readJSONValue(dec); err != nil {
				return nil, err
			}
		}
		_, err := dec.ReadToken()
		return m, err
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			e, err := readJSONValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, e)
		}
		_, err := dec.ReadToken()
		return a, err
	}
	return nil, errJSONKind
}
