package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDecodeStringArray: a column holding a JSON array of strings reads as encoding/json reads
// it, whether it takes the plain split or not, as the store or either database writes it.
func TestDecodeStringArray(t *testing.T) {
	for _, raw := range []string{
		`[]`, ` [ ] `, `["a"]`, `["doc:read","doc:write","*"]`, `["doc:read", "doc:write"]`, ` [ "a" , "b" ] `,
		`["é", "😀"]`, `["a\"b"]`, `["a\\b", "c"]`, `["\u0041"]`, `["a","b",]`, `["a" "b"]`, `["a"`, `[`, `"a"`,
		`["a"]x`, `[1]`, `[null]`, `["a",null]`, "[\"a\tb\"]", "[\"\xff\"]", `{"a":1}`,
	} {
		got, err := decodeStringArray([]byte(raw))
		var want []string
		wantErr := json.Unmarshal([]byte(raw), &want)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("decodeStringArray(%q) = %#v, %v; encoding/json gives %#v, %v", raw, got, err, want, wantErr)
		}
	}
	if got, err := decodeStringArray(nil); got != nil || err != nil {
		t.Errorf("decodeStringArray(nil) = %v, %v", got, err)
	}
}
