package server

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestQuickBodyCheck: the quick check (validate_quick.go) never calls valid a body that the
// JSON Schema validator refuses. For every operation of the spec with a JSON body and a quick
// form, its example and thousands of mutations of it (members removed, added, retyped,
// emptied, lengthened, arrays grown past their bounds, strings outside their pattern or enum)
// are checked both ways; the examples of the two decision operations must take the quick
// path, so that it is not vacuous.
func TestQuickBodyCheck(t *testing.T) {
	doc := loadTestSpec(t)
	bodies, err := compileBodies(doc)
	if err != nil {
		t.Fatal(err)
	}
	withQuick := 0
	for _, name := range []string{"authorize", "authorizeBatch"} {
		if bodies[name] == nil || bodies[name].quick == nil {
			t.Fatalf("%s has no quick body check", name)
		}
	}
	rng := rand.New(rand.NewPCG(24, 100))
	accepted, refused := 0, 0
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for _, method := range []string{"POST", "PUT", "PATCH", "DELETE", "GET"} {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			b := bodies[op.OperationID]
			if b == nil || b.quick == nil {
				continue
			}
			withQuick++
			mt := op.RequestBody.Value.Content.Get("application/json")
			if mt.Example == nil {
				continue
			}
			raw, err := json.Marshal(mt.Example)
			if err != nil {
				t.Fatal(err)
			}
			example, _ := decodeJSONDocument(raw)
			if (op.OperationID == "authorize" || op.OperationID == "authorizeBatch") && !quickValid(b.quick, example) {
				t.Errorf("%s: the quick check does not accept the spec's example %s", op.OperationID, raw)
			}
			for i := range 3000 {
				v := example
				if i > 0 {
					v = mutate(rng, example)
				}
				quick := quickValid(b.quick, v)
				full := b.schema.Validate(v) == nil
				if quick && !full {
					out, _ := json.Marshal(v)
					t.Fatalf("%s %s: the quick check accepts %s, which the validator refuses", op.OperationID, path, out)
				}
				if quick {
					accepted++
				}
				if !full {
					refused++
				}
			}
		}
	}
	t.Logf("%d operations with a quick body check; %d bodies accepted quickly, %d refused by the validator", withQuick, accepted, refused)
	if accepted < 1000 || refused < 1000 {
		t.Errorf("the mutations exercised too little: %d accepted, %d refused", accepted, refused)
	}
}

// mutate returns a copy of v with one to three random changes somewhere in its tree.
func mutate(rng *rand.Rand, v any) any {
	v = deepCopy(v)
	for range 1 + rng.IntN(3) {
		v = mutateAt(rng, v)
	}
	return v
}

// mutateAt changes v or, more often, something inside it.
func mutateAt(rng *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 && rng.IntN(4) > 0 {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			k := keys[rng.IntN(len(keys))]
			switch rng.IntN(6) {
			case 0:
				delete(x, k)
			case 1:
				x[strings.ToUpper(k[:1])+k[1:]] = x[k]
			default:
				x[k] = mutateAt(rng, x[k])
			}
			return x
		}
		if rng.IntN(2) == 0 {
			x["zzUnknown"] = "x"
			return x
		}
	case []any:
		if len(x) > 0 && rng.IntN(4) > 0 {
			switch rng.IntN(5) {
			case 0:
				out := x
				for len(out) <= 100 {
					out = append(out, x...)
				}
				return out
			case 1:
				return x[:0]
			default:
				i := rng.IntN(len(x))
				x[i] = mutateAt(rng, x[i])
				return x
			}
		}
	case string:
		if rng.IntN(2) == 0 {
			return []string{"", "x", "user", "service_account", "document:read", "Document:Read", "*", "a:b:c",
				strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("é", 128), strings.Repeat("é", 256),
				strings.Repeat("b", 255) + ":c", "prj_x", "not an email", "a@example.com", "2026-11-26T10:00:00Z",
				"https://example.com/x", "red"}[rng.IntN(19)] + x[:rng.IntN(len(x)+1)]
		}
	}
	return []any{nil, true, false, json.Number("1"), json.Number("1.5"), json.Number("-3"), "", "z",
		map[string]any{}, []any{}, []any{"a"}, strings.Repeat("é", 300)}[rng.IntN(12)]
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := slices.Clone(x)
		for i := range out {
			out[i] = deepCopy(out[i])
		}
		return out
	}
	return v
}

// TestValidatedBodyCarriesItsValue: a body that passes validation stays readable byte for byte
// and carries the value it was decoded to (what the strict handlers bind instead of decoding it
// again); a refused one carries none.
func TestValidatedBodyCarriesItsValue(t *testing.T) {
	doc := loadTestSpec(t)
	v, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	route := v.route("/api/v1/authorize/batch", http.MethodPost)
	for _, tc := range []struct {
		body string
		want any
	}{
		{`{"projectId":"prj_1","checks":[{"principalType":"user","principalId":"u1","permission":"doc:read"}],"explain":true}`,
			map[string]any{"projectId": "prj_1", "explain": true, "checks": []any{
				map[string]any{"principalType": "user", "principalId": "u1", "permission": "doc:read"}}}},
		{`{"projectId":"prj_1","checks":[{"principalType":"user","principalId":"u1","permission":"Doc:Read"}]}`, nil},
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/authorize/batch", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		body, errs, err := v.check(req, route, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (tc.want == nil) != (len(errs) > 0) || !reflect.DeepEqual(body, tc.want) {
			t.Errorf("%s: body %v, errors %v", tc.body, body, errs)
		}
		vb, ok := req.Body.(interface{ ValidatedValue() any })
		switch {
		case tc.want != nil && !ok:
			t.Errorf("%s: the valid body carries no validated value", tc.body)
		case tc.want != nil && !reflect.DeepEqual(vb.ValidatedValue(), tc.want):
			t.Errorf("%s: validated value %v, want %v", tc.body, vb.ValidatedValue(), tc.want)
		case tc.want == nil && ok:
			t.Errorf("%s: a refused body carries a validated value", tc.body)
		}
		if raw, _ := io.ReadAll(req.Body); string(raw) != tc.body {
			t.Errorf("the body reads %q, want %q", raw, tc.body)
		}
	}
}
