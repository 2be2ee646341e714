package server

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeDocuments are bodies on both sides of what encoding/json accepts: the jsontext path of
// decodeJSONDocument must accept exactly those and decode them to the same values.
var decodeDocuments = []string{
	`{"projectId":"prj_1","checks":[{"principalType":"user","principalId":"u1","permission":"doc:read"}],"explain":true}`,
	`{"a":1,"a":2}`, // duplicate names: the last wins
	`{"n":-1.5e+300,"i":12345678901234567890123,"z":0,"f":false,"t":true,"x":null}`,
	`[]`, `{}`, `[[],{}]`, `"s"`, `1`, `null`, ` {"a" : [ 1 , 2 ] } `,
	`{"esc":"a\"b\\c\/d\n\t\r\b\f"}`,
	`{"u":"\u00e9\ud83d\ude00"}`, // \u escapes: encoding/json decides
	`{"bad":"` + "\xff" + `"}`,   // not UTF-8: encoding/json decides (U+FFFD)
	`{"a":1}{"b":2}`, `{"a":1} x`, `{"a":1,}`, `[1,]`, `{"a"}`, `{`, `[`, `"`, ``, `01`, `1.`,
	`{"a":NaN}`, `{'a':1}`, `{"a":1}]`, `tru`, `{"a":"` + "\x01" + `"}`,
}

func TestDecodeJSONDocumentMatchesEncodingJSON(t *testing.T) {
	for _, doc := range decodeDocuments {
		got, gotOK := decodeJSONDocument([]byte(doc))
		want, wantOK := decodeJSONDocumentStd([]byte(doc))
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v, %v; encoding/json %#v, %v", doc, got, gotOK, want, wantOK)
		}
	}
	// Literal expectations, not only agreement.
	v, ok := decodeJSONDocument([]byte(`{"a":1,"a":[2.50,"x",null,true]}`))
	want := map[string]any{"a": []any{json.Number("2.50"), "x", nil, true}}
	if !ok || !reflect.DeepEqual(v, want) {
		t.Errorf("got %#v, %v; want %#v", v, ok, want)
	}
	if _, ok := decodeJSONDocument([]byte(`{"a":1} {}`)); ok {
		t.Error("two documents accepted")
	}
}

func FuzzDecodeJSONDocument(f *testing.F) {
	for _, doc := range decodeDocuments {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gotOK := decodeJSONDocument(raw)
		want, wantOK := decodeJSONDocumentStd(raw)
		if gotOK != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v, %v; encoding/json %#v, %v", raw, got, gotOK, want, wantOK)
		}
	})
}
