package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/oapi-codegen/runtime"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// marshalBody writes v as a request body: encoding/json's output without its HTML escaping
// (\u003c and the like would make every such body one the streamed check does not judge).
func marshalBody(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestStreamedBodies: exactly the typedBodies operations have a streamed check.
func TestStreamedBodies(t *testing.T) {
	v := fastValidator(t)
	for op, b := range v.bodies {
		if got := b.stream != nil; got != typedBodies[op] {
			t.Errorf("%s: streamed check %v, want %v", op, got, typedBodies[op])
		}
	}
}

// TestStreamAgreesWithFast: over the bodies TestFastAgreesWithJSONSchema derives from the spec's
// examples, written out as bytes, the streamed check of each typedBodies operation answers what
// the fast check answers on the decoded body (none of these bodies repeats a name); every body
// it accepts binds (bindDecisionBytes) to what BindJSONValue makes of the decoded body.
func TestStreamAgreesWithFast(t *testing.T) {
	v := fastValidator(t)
	extra := map[string][]string{
		"authorizeBatch": {`{"projectId":"p","explain":true,"checks":` + batchChecks(100) + `}`},
	}
	for path, item := range v.spec.Paths.Map() {
		for method, op := range item.Operations() {
			b := v.bodies[op.OperationID]
			if b == nil || b.stream == nil {
				continue
			}
			bases := requestExamples(t, op)
			for _, e := range extra[op.OperationID] {
				bases = append(bases, decodeBody(t, e))
			}
			judged, accepted := 0, 0
			for i, base := range bases {
				for _, m := range mutants(base) {
					raw := marshalBody(t, m.value)
					if !streamable(raw) {
						continue
					}
					judged++
					doc := decodeBody(t, string(raw))
					stream, fast := b.stream(raw), b.fast(doc)
					if stream != fast {
						t.Errorf("%s %s, example %d, %s: streamed %v, fast %v\n%s", method, path, i, m.what, stream, fast, raw)
						continue
					}
					if !stream {
						continue
					}
					accepted++
					bound := boundDecision(op.OperationID)
					viaLib := boundDecision(op.OperationID)
					if err := runtime.BindJSONValue(doc, viaLib); err != nil || !bindDecisionBytes(raw, bound) || !reflect.DeepEqual(bound, viaLib) {
						t.Errorf("%s, %s: bound %+v, BindJSONValue %+v (%v)\n%s", op.OperationID, m.what, bound, viaLib, err, raw)
					}
				}
			}
			if accepted == 0 || accepted == judged {
				t.Errorf("%s: the streamed check accepted %d of %d bodies, want some but not all", op.OperationID, accepted, judged)
			}
			t.Logf("%s: %d bodies judged, %d accepted", op.OperationID, judged, accepted)
		}
	}
}

// boundDecision is a new destination for an operation of typedBodies.
func boundDecision(op string) any {
	if op == "authorizeBatch" {
		return new(gen.AuthorizeBatchRequest)
	}
	return new(gen.AuthorizeRequest)
}

// TestStreamLiteral: the streamed batch check on literal bodies that the tree-built mutants
// cannot write: repeated names, escapes, bytes after the document, documents cut short.
func TestStreamLiteral(t *testing.T) {
	b := fastValidator(t).bodies["authorizeBatch"]
	const check = `{"principalType":"user","principalId":"u1","permission":"doc:read"}`
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"projectId":"p","checks":[` + check + `]}`, true},
		{` {"projectId":"p","checks":[` + check + `]} `, true},
		{`{"projectId":"prj_01m8d5e3x","checks":[` + check + `]}`, true}, // where mayHoldHugeNumber holds
		{`{"projectId":"p\"q","checks":[` + check + `]}`, true},
		{`{"projectId":"p","checks":[{"principalType":"user","principalId":"u1","permission":"Doc:read"}]}`, false},
		{`{"projectId":"p","checks":[{"principalType":"user","principalId":"u1","permission":"doc\/read"}]}`, false},
		{`{"projectId":"p","checks":[{"principalType":"user","principalId":"u1","permission":"do\u0063:read"}]}`, true},
		{`{"projectId":"p","projectId":"q","checks":[` + check + `]}`, false},
		{`{"projectId":"p","checks":[{"principalType":"user","principalType":"user","principalId":"u1","permission":"a:b"}]}`, false},
		{`{"projectId":"p","checks":[` + check + `]} {}`, false},
		{`{"projectId":"p","checks":[` + check + `]`, false},
		{`{"projectId":"p","checks":[]}`, false},
		{`{"projectId":"p"}`, false},
		{`{"projectId":"p","checks":[` + check + `],"explain":true}`, true},
		{`{"projectId":"p","checks":[` + check + `],"explain":null}`, false},
		{`{"projectId":"p","checks":[` + check + `],"extra":1}`, false},
		{`{"projectId":"","checks":[` + check + `]}`, false},
		{`{"projectId":"p","checks":[{"principalType":"group","principalId":"u1","permission":"a:b"}]}`, false},
		{`{"projectId":"p","checks":[{"principalType":"user","principalId":"u1"}]}`, false},
	} {
		if got := b.stream([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: streamed %v, want %v", tc.body, got, tc.want)
		}
	}
}

// FuzzStreamValidator: whatever bytes the streamed check of a typedBodies operation accepts (of
// those validateBody gives it) decode to a body that jsonschema and the fast check accept, and
// bind by hand to what BindJSONValue makes of it.
func FuzzStreamValidator(f *testing.F) {
	for _, seed := range []string{
		`{"projectId":"prj_01JD3M5C2V8R1K4Y7P0QWZT6NB","checks":[{"principalType":"user","principalId":"user-42","permission":"document:read"}]}`,
		`{"projectId":"p","explain":true,"checks":[{"principalType":"service_account","principalId":"indexer","permission":"*"},{"principalType":"user","principalId":"日本","permission":"a:b"}]}`,
		`{"projectId":"p","principalType":"user","principalId":"user-42","permission":"document:write","explain":false}`,
		`{"projectId":"p","principalType":"user","principalId":"a\"b\\c","permission":"*"}`,
	} {
		f.Add([]byte(seed))
	}
	v := fastValidator(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for op := range typedBodies {
			b := v.bodies[op]
			if !streamable(raw) || !b.stream(raw) {
				continue
			}
			doc, ok := decodeJSONDocument(raw)
			if !ok {
				t.Fatalf("%s: the streamed check accepts %q, which is not one JSON document", op, raw)
			}
			if err := b.schema.Validate(doc); err != nil || !b.fast(doc) {
				t.Fatalf("%s: the streamed check accepts %q; jsonschema: %v, fast check %v", op, raw, err, b.fast(doc))
			}
			bound, viaLib := boundDecision(op), boundDecision(op)
			if err := runtime.BindJSONValue(doc, viaLib); err != nil || !bindDecisionBytes(raw, bound) || !reflect.DeepEqual(bound, viaLib) {
				t.Fatalf("%s: %q bound %+v, BindJSONValue %+v (%v)", op, raw, bound, viaLib, err)
			}
		}
	})
}
