package server

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gatehouse-dev/gatehouse/openapi"
)

// fastSpec is the document the fast-check tests read, with its compiled bodies, loaded once.
var fastSpec = sync.OnceValues(func() (*validator, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML)
	if err != nil {
		return nil, err
	}
	return newValidator(doc)
})

func fastValidator(t testing.TB) *validator {
	t.Helper()
	v, err := fastSpec()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decodeBody(t testing.TB, raw string) any {
	t.Helper()
	v, ok := decodeJSONDocument([]byte(raw))
	if !ok {
		t.Fatalf("not one JSON document: %s", raw)
	}
	return v
}

// batchChecks is a batch body's checks member with n valid checks.
func batchChecks(n int) string {
	checks := make([]string, n)
	for i := range checks {
		checks[i] = fmt.Sprintf(`{"principalType":"user","principalId":"user-%d","permission":"document:read"}`, i)
	}
	return "[" + strings.Join(checks, ",") + "]"
}

// TestFastBatchBody: the authorizeBatch body's fast check against literal bodies, each rule of
// AuthorizeBatchRequest met and broken once. jsonschema's verdict is checked beside it.
func TestFastBatchBody(t *testing.T) {
	b := fastValidator(t).bodies["authorizeBatch"]
	if b == nil || b.fast == nil {
		t.Fatal("authorizeBatch has no fast check")
	}
	const check = `{"principalType":"user","principalId":"user-42","permission":"document:read"}`
	body := func(checks string) string {
		return `{"projectId":"prj_01JD3M5C2V8R1K4Y7P0QWZT6NB","checks":` + checks + `}`
	}
	withCheck := func(c string) string { return body("[" + check + "," + c + "]") }
	perm128 := "a:" + strings.Repeat("b", 126)
	cases := []struct {
		name string
		body string
		want bool
	}{
		{"one check", body("[" + check + "]"), true},
		{"100 checks", body(batchChecks(100)), true},
		{"explain true", `{"projectId":"p","explain":true,"checks":[` + check + `]}`, true},
		{"explain false", `{"projectId":"p","explain":false,"checks":[` + check + `]}`, true},
		{"wildcard permission", withCheck(`{"principalType":"service_account","principalId":"indexer","permission":"*"}`), true},
		{"permission of 128 characters", withCheck(`{"principalType":"user","principalId":"u","permission":"` + perm128 + `"}`), true},
		{"permission of 129 characters", withCheck(`{"principalType":"user","principalId":"u","permission":"` + perm128 + `b"}`), false},
		{"principalId of 255 three-byte runes", withCheck(`{"principalType":"user","principalId":"` + strings.Repeat("日", 255) + `","permission":"a:b"}`), true},
		{"principalId of 256 three-byte runes", withCheck(`{"principalType":"user","principalId":"` + strings.Repeat("日", 256) + `","permission":"a:b"}`), false},
		{"projectId of 64 two-byte runes", `{"projectId":"` + strings.Repeat("é", 64) + `","checks":[` + check + `]}`, true},
		{"projectId of 65 two-byte runes", `{"projectId":"` + strings.Repeat("é", 65) + `","checks":[` + check + `]}`, false},
		{"projectId of 65 ASCII characters", `{"projectId":"` + strings.Repeat("p", 65) + `","checks":[` + check + `]}`, false},
		{"empty projectId", `{"projectId":"","checks":[` + check + `]}`, false},
		{"empty principalId", withCheck(`{"principalType":"user","principalId":"","permission":"a:b"}`), false},
		{"0 checks", body("[]"), false},
		{"101 checks", body(batchChecks(101)), false},
		{"principalType group", withCheck(`{"principalType":"group","principalId":"u","permission":"a:b"}`), false},
		{"principalType User", withCheck(`{"principalType":"User","principalId":"u","permission":"a:b"}`), false},
		{"permission upper case", withCheck(`{"principalType":"user","principalId":"u","permission":"Document:read"}`), false},
		{"permission without action", withCheck(`{"principalType":"user","principalId":"u","permission":"document"}`), false},
		{"permission with a trailing space", withCheck(`{"principalType":"user","principalId":"u","permission":"document:read "}`), false},
		{"permission *x", withCheck(`{"principalType":"user","principalId":"u","permission":"*x"}`), false},
		{"permission with a multi-byte rune", withCheck(`{"principalType":"user","principalId":"u","permission":"document:réad"}`), false},
		{"projectId missing", `{"checks":[` + check + `]}`, false},
		{"checks missing", `{"projectId":"p"}`, false},
		{"principalType missing", withCheck(`{"principalId":"u","permission":"a:b"}`), false},
		{"principalId missing", withCheck(`{"principalType":"user","permission":"a:b"}`), false},
		{"permission missing", withCheck(`{"principalType":"user","principalId":"u"}`), false},
		{"extra member", `{"projectId":"p","checks":[` + check + `],"dryRun":true}`, false},
		{"extra member in a check", withCheck(`{"principalType":"user","principalId":"u","permission":"a:b","note":"x"}`), false},
		{"projectId a number", `{"projectId":42,"checks":[` + check + `]}`, false},
		{"checks an object", body(check), false},
		{"a check a string", body(`["document:read"]`), false},
		{"a check null", body(`[null]`), false},
		{"principalId a number", withCheck(`{"principalType":"user","principalId":42,"permission":"a:b"}`), false},
		{"permission null", withCheck(`{"principalType":"user","principalId":"u","permission":null}`), false},
		{"explain a string", `{"projectId":"p","explain":"true","checks":[` + check + `]}`, false},
		{"explain 1", `{"projectId":"p","explain":1,"checks":[` + check + `]}`, false},
		{"explain null", `{"projectId":"p","explain":null,"checks":[` + check + `]}`, false},
		{"body an array", `[` + check + `]`, false},
		{"body a string", `"x"`, false},
		{"body null", `null`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := decodeBody(t, tc.body)
			if got := b.fast(v); got != tc.want {
				t.Errorf("fast = %v, want %v", got, tc.want)
			}
			if got := b.schema.Validate(v) == nil; got != tc.want {
				t.Errorf("jsonschema valid = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFastBodiesCompiled: the hot bodies get a fast check; a schema using a keyword the check
// does not reproduce, or a $ref left in place, gets none and is validated as before.
func TestFastBodiesCompiled(t *testing.T) {
	v := fastValidator(t)
	for _, op := range []string{"authorize", "authorizeBatch", "ingestUsageEvent", "ingestUsageEventBatch"} {
		if b := v.bodies[op]; b == nil || b.fast == nil {
			t.Errorf("%s has no fast check", op)
		}
	}
	const spec = `
openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /plain:
    post:
      operationId: plain
      requestBody: {content: {application/json: {schema: {type: object, properties: {a: {type: string, description: d, x-go-type: string}}}}}}
      responses: {"200": {description: ok}}
  /oneof:
    post:
      operationId: oneOf
      requestBody: {content: {application/json: {schema: {type: object, properties: {a: {oneOf: [{type: string}, {type: integer}]}}}}}}
      responses: {"200": {description: ok}}
  /unique:
    post:
      operationId: unique
      requestBody: {content: {application/json: {schema: {type: array, uniqueItems: true, items: {type: string}}}}}
      responses: {"200": {description: ok}}
  /unknown:
    post:
      operationId: unknownKeyword
      requestBody: {content: {application/json: {schema: {type: object, nullable: true}}}}
      responses: {"200": {description: ok}}
  /numberenum:
    post:
      operationId: numberEnum
      requestBody: {content: {application/json: {schema: {enum: [1, 2]}}}}
      responses: {"200": {description: ok}}
  /recursive:
    post:
      operationId: recursive
      requestBody: {content: {application/json: {schema: {$ref: "#/components/schemas/Node"}}}}
      responses: {"200": {description: ok}}
components:
  schemas:
    Node:
      type: object
      properties:
        children: {type: array, items: {$ref: "#/components/schemas/Node"}}
`
	doc, err := openapi3.NewLoader().LoadFromData([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	small, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"plain": true, "oneOf": false, "unique": false, "unknownKeyword": false, "numberEnum": false, "recursive": false}
	for op, fast := range want {
		if got := small.bodies[op].fast != nil; got != fast {
			t.Errorf("%s: has a fast check = %v, want %v", op, got, fast)
		}
	}
}

// fastMutant is a body derived from an example. exact is false where the fast check may leave a
// valid body to jsonschema (a number written with an exponent, 1.0, -0): there only "fast
// implies valid" is required.
type fastMutant struct {
	what  string
	value any
	exact bool
}

// replacementValues are put in place of every member and element of an example: every JSON type,
// strings around the length bounds the spec uses (in ASCII and in multi-byte runes), strings
// meant for its patterns and formats, and numbers around zero.
func replacementValues(orig any) []fastMutant {
	num := func(s string, exact bool) fastMutant { return fastMutant{"number " + s, json.Number(s), exact} }
	out := []fastMutant{
		{"null", nil, true}, {"true", true, true}, {"false", false, true},
		num("0", true), num("1", true), num("-1", true), num("1.5", true), num("-0.5", true),
		num("12345678901234567890", true), num("-0", false), num("1.0", false), num("1e2", false), num("-2E-3", false),
		{"empty array", []any{}, true}, {"array of a string", []any{"x"}, true},
		{"empty object", map[string]any{}, true}, {"object", map[string]any{"k": "v"}, true},
	}
	for _, s := range []string{"", "x", " x", "*", "*x", "user", "User", "service_account",
		"document:read", "Document:read", "a@example.com", "not-an-email", "2026-11-22T10:00:00Z",
		"2026-13-01T00:00:00Z", "api_call", "-meter", "https://example.com/x"} {
		out = append(out, fastMutant{fmt.Sprintf("string %q", s), s, true})
	}
	for _, n := range []int{1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129, 254, 255, 256, 1000} {
		out = append(out,
			fastMutant{fmt.Sprintf("%d ASCII letters", n), strings.Repeat("a", n), true},
			fastMutant{fmt.Sprintf("%d two-byte runes", n), strings.Repeat("é", n), true},
			fastMutant{fmt.Sprintf("%d three-byte runes", n), strings.Repeat("日", n), true},
			fastMutant{fmt.Sprintf("%d four-byte runes", n), strings.Repeat("😀", n), true},
			fastMutant{fmt.Sprintf("permission of %d characters", n), "a:" + strings.Repeat("b", max(n-2, 1)), true})
	}
	if s, ok := orig.(string); ok {
		out = append(out,
			fastMutant{"upper case", strings.ToUpper(s), true},
			fastMutant{"one rune more", s + "é", true},
			fastMutant{"one letter more", s + "a", true},
			fastMutant{"one letter less", strings.TrimSuffix(s, s[max(len(s)-1, 0):]), true})
	}
	if a, ok := orig.([]any); ok && len(a) > 0 {
		for _, n := range []int{1, 2, 100, 101, 1000, 1001} {
			grown := make([]any, n)
			for i := range grown {
				grown[i] = a[i%len(a)]
			}
			out = append(out, fastMutant{fmt.Sprintf("%d items", n), grown, true})
		}
	}
	return out
}

// mutants derives bodies from v: v itself, then each member dropped, an unknown member added to
// each object, each member and element (the first two of an array) replaced by
// replacementValues, recursively.
func mutants(v any) []fastMutant {
	out := []fastMutant{{"as is", v, true}}
	switch x := v.(type) {
	case map[string]any:
		with := func(k string, e any) map[string]any {
			m := make(map[string]any, len(x)+1)
			for k2, e2 := range x {
				m[k2] = e2
			}
			m[k] = e
			return m
		}
		out = append(out, fastMutant{"unknown member added", with("zzUnknown", "x"), true})
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			dropped := with(k, nil)
			delete(dropped, k)
			out = append(out, fastMutant{k + " dropped", dropped, true})
			for _, r := range replacementValues(x[k]) {
				out = append(out, fastMutant{k + ": " + r.what, with(k, r.value), r.exact})
			}
			for _, m := range mutants(x[k])[1:] {
				out = append(out, fastMutant{k + "." + m.what, with(k, m.value), m.exact})
			}
		}
	case []any:
		for i := range min(len(x), 2) {
			at := func(e any) []any {
				a := append([]any{}, x...)
				a[i] = e
				return a
			}
			for _, r := range replacementValues(x[i]) {
				out = append(out, fastMutant{fmt.Sprintf("%d: %s", i, r.what), at(r.value), r.exact})
			}
			for _, m := range mutants(x[i])[1:] {
				out = append(out, fastMutant{fmt.Sprintf("%d.%s", i, m.what), at(m.value), m.exact})
			}
		}
	}
	return out
}

// requestExamples are an operation's JSON request body examples, decoded as request bodies are
// (numbers as json.Number).
func requestExamples(t *testing.T, op *openapi3.Operation) []any {
	mt := op.RequestBody.Value.Content.Get("application/json")
	var raw []any
	if mt.Example != nil {
		raw = append(raw, mt.Example)
	}
	for _, name := range sortedKeys(mt.Examples) {
		if ex := mt.Examples[name]; ex != nil && ex.Value != nil && ex.Value.Value != nil {
			raw = append(raw, ex.Value.Value)
		}
	}
	var out []any
	for _, r := range raw {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decodeBody(t, string(b)))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestFastAgreesWithJSONSchema: for every operation with a fast check, over its spec examples
// and bodies derived from them, the fast check accepts exactly what jsonschema accepts (for the
// numbers left to jsonschema: accepts only what it accepts).
func TestFastAgreesWithJSONSchema(t *testing.T) {
	v := fastValidator(t)
	extra := map[string][]string{
		"authorizeBatch": {`{"projectId":"p","explain":true,"checks":` + batchChecks(100) + `}`},
	}
	total, accepted := 0, 0
	for path, item := range v.spec.Paths.Map() {
		for method, op := range item.Operations() {
			b := v.bodies[op.OperationID]
			if b == nil || b.fast == nil {
				continue
			}
			bases := requestExamples(t, op)
			for _, e := range extra[op.OperationID] {
				bases = append(bases, decodeBody(t, e))
			}
			if len(bases) == 0 {
				t.Errorf("%s %s (%s): no request example to derive bodies from", method, path, op.OperationID)
			}
			opAccepted := 0
			for i, base := range bases {
				for _, m := range mutants(base) {
					total++
					fast, valid := b.fast(m.value), b.schema.Validate(m.value) == nil
					if fast {
						accepted++
						opAccepted++
					}
					if fast && !valid || m.exact && fast != valid {
						body, _ := json.Marshal(m.value)
						t.Errorf("%s, example %d, %s: fast = %v, jsonschema valid = %v\n%s", op.OperationID, i, m.what, fast, valid, body)
					}
				}
			}
			if opAccepted == 0 {
				t.Errorf("%s: the fast check accepted no body", op.OperationID)
			}
		}
	}
	t.Logf("%d bodies, %d accepted by the fast check", total, accepted)
}

// FuzzFastValidator: whatever JSON the decoder accepts, a fast check that accepts it is never
// contradicted by jsonschema, for every operation with one.
func FuzzFastValidator(f *testing.F) {
	for _, seed := range []string{
		`{"projectId":"prj_01JD3M5C2V8R1K4Y7P0QWZT6NB","checks":[{"principalType":"user","principalId":"user-42","permission":"document:read"}]}`,
		`{"projectId":"p","explain":true,"checks":[{"principalType":"service_account","principalId":"indexer","permission":"*"},{"principalType":"user","principalId":"日本","permission":"a:b"}]}`,
		`{"projectId":"p","principalType":"user","principalId":"user-42","permission":"document:write","explain":false}`,
		`{"eventId":"evt_1","subjectId":"usr_1","environmentId":"env_1","meter":"api_call","quantity":1,"timestamp":"2026-11-22T10:00:00Z","properties":{"route":"/v1/search"}}`,
		`{"eventId":"evt_1","subjectId":"usr_1","environmentId":"env_1","meter":"api_call","quantity":-0.0}`,
		`{"environmentId":"env_1","events":[{"eventId":"e1","subjectId":"s","meter":"m"},{"eventId":"e2","subjectId":"s","meter":"storage_gb","quantity":2.5,"timestamp":"2026-11-22T10:00:00+01:00"}]}`,
		`{"environmentId":"env_1","events":[{"eventId":"e1","subjectId":"s","meter":"m","quantity":1e2}]}`,
	} {
		f.Add([]byte(seed))
	}
	// Strings at their maxLength, so that one more byte or rune crosses it.
	f.Add([]byte(`{"projectId":"` + strings.Repeat("p", 64) + `","checks":[{"principalType":"user","principalId":"` +
		strings.Repeat("é", 255) + `","permission":"a:` + strings.Repeat("b", 126) + `"}]}`))
	f.Add([]byte(`{"projectId":"p","principalType":"user","principalId":"` + strings.Repeat("u", 255) +
		`","permission":"` + strings.Repeat("a", 64) + `:` + strings.Repeat("b", 63) + `"}`))
	f.Add([]byte(`{"environmentId":"` + strings.Repeat("é", 64) + `","events":[{"eventId":"` + strings.Repeat("e", 255) +
		`","subjectId":"` + strings.Repeat("日", 255) + `","meter":"m` + strings.Repeat("_", 63) + `"}]}`))
	v := fastValidator(f)
	ids := sortedKeys(v.bodies)
	f.Fuzz(func(t *testing.T, raw []byte) {
		doc, ok := decodeJSONDocument(raw)
		if !ok {
			return
		}
		// Beside the document, the documents with one of its strings a rune longer or shorter:
		// random bytes seldom land a string just past a length bound.
		docs := append([]any{doc}, stringNeighbours(doc, 64)...)
		for _, id := range ids {
			b := v.bodies[id]
			if b.fast == nil {
				continue
			}
			for _, d := range docs {
				if b.fast(d) {
					if err := b.schema.Validate(d); err != nil {
						body, _ := json.Marshal(d)
						t.Fatalf("%s: the fast check accepts %s, jsonschema refuses it: %v", id, body, err)
					}
				}
			}
		}
	})
}

// stringNeighbours are copies of v with one string (a member or element, the first limit of
// them) one rune longer (a two-byte rune) or one rune shorter.
func stringNeighbours(v any, limit int) []any {
	var out []any
	var walk func(v any, set func(any) any)
	walk = func(v any, set func(any) any) {
		if len(out) >= 2*limit {
			return
		}
		switch x := v.(type) {
		case string:
			out = append(out, set(x+"é"))
			if r := []rune(x); len(r) > 0 {
				out = append(out, set(string(r[:len(r)-1])))
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k], func(e any) any {
					m := make(map[string]any, len(x))
					for k2, e2 := range x {
						m[k2] = e2
					}
					m[k] = e
					return set(m)
				})
			}
		case []any:
			for i := range x {
				walk(x[i], func(e any) any {
					a := append([]any{}, x...)
					a[i] = e
					return set(a)
				})
			}
		}
	}
	walk(v, func(e any) any { return e })
	return out
}

// BenchmarkBodyValidation: a decoded /authorize body and a 100-check batch body, by the fast
// check, by the streamed check (and bound from the bytes) and by jsonschema.
func BenchmarkBodyValidation(b *testing.B) {
	v := fastValidator(b)
	for _, tc := range []struct{ name, op, body string }{
		{"single", "authorize", `{"projectId":"p","principalType":"user","principalId":"user-42","permission":"document:read"}`},
		{"batch", "authorizeBatch", `{"projectId":"p","checks":` + batchChecks(100) + `}`},
	} {
		body, doc := v.bodies[tc.op], decodeBody(b, tc.body)
		b.Run(tc.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !body.fast(doc) {
					b.Fatal("refused")
				}
			}
		})
		b.Run(tc.name+"/streamed", func(b *testing.B) {
			raw := []byte(tc.body)
			b.ReportAllocs()
			for b.Loop() {
				if !body.stream(raw) {
					b.Fatal("refused")
				}
			}
		})
		b.Run(tc.name+"/bound", func(b *testing.B) {
			raw := []byte(tc.body)
			b.ReportAllocs()
			for b.Loop() {
				if !bindDecisionBytes(raw, boundDecision(tc.op)) {
					b.Fatal("not bound")
				}
			}
		})
		b.Run(tc.name+"/jsonschema", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := body.schema.Validate(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
