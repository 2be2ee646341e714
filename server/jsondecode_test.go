package server

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

// stdDecodeJSONDocument is decodeJSONDocument's reference: encoding/json's Decoder with
// UseNumber, refusing anything after the one document but white space.
func stdDecodeJSONDocument(raw []byte) (v any, ok bool) {
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

// jsonDocumentCases are documents, valid and not, where a hand-written decoder could differ
// from encoding/json.
var jsonDocumentCases = []string{
	``, ` `, `{}`, `[]`, ` {"a" : [1, -0, 0.5e+3, 1E9, -12.25e-2] } `, `{"a":1,"a":2}`, `{"a":{"a":null}}`,
	`"plain"`, `"é ü 😀"`, `"tab\there"`, `"\u00e9\u0000\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`,
	`"\/\b\f\n\r\"\\"`, "\"raw\ttab\"", "\"\xff\xfe bad utf-8\"", "\"\xed\xa0\x80 surrogate\"", `"\x"`, `"\u12"`, `"\u"`,
	`"unterminated`, `"a\`, `01`, `-`, `-a`, `1.`, `.5`, `1e`, `1e+`, `+1`, `1.5.5`, `0x10`, `NaN`, `-Infinity`,
	`tru`, `true`, `truex`, `true false`, `nul`, `null`, `[1,]`, `[,1]`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{1:2}`,
	`{"a":1}}`, `[1]]`, `{} x`, `{}` + "\n\t\r ", "\u00a0{}", `[` + strings.Repeat(`"x",`, 50) + `"y"]`,
	`{"projectId":"prj_1","checks":[{"principalType":"user","principalId":"u1","permission":"doc:read"}],"explain":true}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

// TestDecodeJSONDocument: decodeJSONDocument gives encoding/json's answer, value for value, on
// every case above.
func TestDecodeJSONDocument(t *testing.T) {
	for _, raw := range jsonDocumentCases {
		checkDecodeJSONDocument(t, []byte(raw))
	}
}

// FuzzDecodeJSONDocument holds decodeJSONDocument equal to encoding/json on any input:
//
//	go test -run '^$' -fuzz FuzzDecodeJSONDocument -fuzztime 60s ./server/
func FuzzDecodeJSONDocument(f *testing.F) {
	for _, raw := range jsonDocumentCases {
		if len(raw) < 1000 {
			f.Add([]byte(raw))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkDecodeJSONDocument(t, raw) })
}

func checkDecodeJSONDocument(t *testing.T, raw []byte) {
	t.Helper()
	got, ok := decodeJSONDocument(raw)
	want, wantOK := stdDecodeJSONDocument(raw)
	if ok != wantOK || !reflect.DeepEqual(got, want) {
		short := string(raw)
		if len(short) > 200 {
			short = short[:200] + "…"
		}
		t.Errorf("decodeJSONDocument(%q) = %#v, %v; encoding/json gives %#v, %v", short, got, ok, want, wantOK)
	}
}
