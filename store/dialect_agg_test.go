package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDecodeStringAgg: a stringAgg column reads as encoding/json reads it, whether it takes the
// plain split or not, as either database writes it.
func TestDecodeStringAgg(t *testing.T) {
	for _, raw := range []string{
		`[]`, ` [ ] `, `["a"]`, `["doc:read","doc:write","*"]`, `["doc:read", "doc:write"]`, ` [ "a" , "b" ] `,
		`["é", "😀"]`, `["a\"b"]`, `["a\\b", "c"]`, `["\u0041"]`, `["a","b",]`, `["a" "b"]`, `["a"`, `[`, `"a"`,
		`["a"]x`, `[1]`, `[null]`, `["a",null]`, "[\"a\tb\"]", "[\"\xff\"]", `{"a":1}`,
	} {
		got, err := decodeStringAgg([]byte(raw))
		var want []string
		wantErr := json.Unmarshal([]byte(raw), &want)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("decodeStringAgg(%q) = %#v, %v; encoding/json gives %#v, %v", raw, got, err, want, wantErr)
		}
	}
	if got, err := decodeStringAgg(nil); got != nil || err != nil {
		t.Errorf("decodeStringAgg(nil) = %v, %v", got, err)
	}
}
