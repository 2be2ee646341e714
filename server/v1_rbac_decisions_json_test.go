package server

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// The answers of POST /authorize and /authorize/batch are written by decisionsAnswer, without
// reflection; these tests hold it to the bytes the generated response types write.

// decisionBody is, through the generated types, one check's decision under decision id id, with its explanation when explain
// is set: the granting bindings when allowed, the reason and every binding considered when
// denied.
func decisionBody(r store.CheckResult, explain bool, id string) gen.AuthorizationDecision {
	out := gen.AuthorizationDecision{Allowed: r.Allowed, Roles: r.Roles, DecisionId: id}
	if !explain {
		return out
	}
	if r.Allowed {
		granted := r.GrantedBy()
		by := make([]gen.GrantingBinding, len(granted))
		for i, b := range granted {
			by[i] = gen.GrantingBinding{BindingId: b.BindingID, RoleId: b.RoleID, RoleSlug: b.RoleSlug,
				Matched: b.Matched, ExpiresAt: nullableOf(b.ExpiresAt)}
		}
		out.Explanation = &gen.DecisionExplanation{GrantedBy: &by}
		return out
	}
	considered := make([]gen.ConsideredBinding, len(r.Bindings))
	for i, b := range r.Bindings {
		considered[i] = gen.ConsideredBinding{BindingId: b.BindingID, RoleSlug: b.RoleSlug,
			ExpiresAt: nullableOf(b.ExpiresAt), Expired: b.Expired}
	}
	reason := gen.DecisionExplanationReason(r.DenialReason())
	out.Explanation = &gen.DecisionExplanation{Reason: &reason, Considered: &considered}
	return out
}

// answerCases are results that exercise every member and every string the encoder copies
// or leaves to encoding/json: nil and empty roles, expiries with and without nanoseconds and
// in a zone other than UTC, text that needs escaping (quotes, HTML, control characters,
// U+2028, invalid UTF-8, non-ASCII), every denial reason.
func answerCases() []store.CheckResult {
	at := time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC)
	nano := time.Date(2027, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 5*3600+1800))
	return []store.CheckResult{
		{Decision: store.Decision{Allowed: false, Roles: nil}},
		{Decision: store.Decision{Allowed: false, Roles: []string{}}, Bindings: []store.CheckedBinding{}},
		{Decision: store.Decision{Allowed: true, Roles: []string{"editor", "viewer"}}, Bindings: []store.CheckedBinding{
			{BindingID: "rb_1", RoleID: "role_e", RoleSlug: "editor", Matched: "document:read"},
			{BindingID: "rb_2", RoleID: "role_s", RoleSlug: "super", ExpiresAt: &at, Expired: true, Matched: "*"},
			{BindingID: "rb_3", RoleID: "role_v", RoleSlug: "viewer", ExpiresAt: &nano, Matched: "*"},
			{BindingID: "rb_4", RoleID: "role_x", RoleSlug: "x"},
		}},
		{Decision: store.Decision{Allowed: false, Roles: []string{"a<b>&c", "<", ">", "&", "q\"", "\\"}}, Bindings: []store.CheckedBinding{
			{BindingID: "rb_\"q\"\\", RoleID: "role_1", RoleSlug: "a<b>&c", ExpiresAt: &at, Expired: true, Matched: "x"},
		}},
		{Decision: store.Decision{Allowed: false, Roles: []string{"é\u2028\u2029\x01\n\t\xff", "\x01", "\n", "\u2028", "\xff", "é"}}, Bindings: []store.CheckedBinding{
			{BindingID: "rb_5", RoleID: "role_5", RoleSlug: "é\u2028\u2029\x01\n\t\xff", ExpiresAt: &nano},
		}},
		{Decision: store.Decision{Allowed: true, Roles: []string{"🙂"}}, Bindings: []store.CheckedBinding{
			{BindingID: "rb_6", RoleID: "role_6", RoleSlug: "🙂", Matched: "perm\x7f:é"},
		}},
	}
}

// TestDecisionsAnswerMatchesGenerated: every case, single and as one batch, explained and not,
// is written byte for byte as gen.Authorize200JSONResponse and gen.AuthorizeBatch200JSONResponse
// write it, with the same status and content type.
func TestDecisionsAnswerMatchesGenerated(t *testing.T) {
	cases := answerCases()
	ids := store.NewIDs("dec", len(cases))
	for _, explain := range []bool{false, true} {
		for i, r := range cases {
			want := httptest.NewRecorder()
			if err := (gen.Authorize200JSONResponse{Data: decisionBody(r, explain, ids[i])}).VisitAuthorizeResponse(want); err != nil {
				t.Fatal(err)
			}
			got := httptest.NewRecorder()
			a := decisionsAnswer{single: true, explain: explain, results: []store.CheckResult{r}, ids: ids[i : i+1]}
			if err := a.VisitAuthorizeResponse(got); err != nil {
				t.Fatal(err)
			}
			compareRecorded(t, got, want)
		}
		out := make([]gen.AuthorizationDecision, len(cases))
		for i, r := range cases {
			out[i] = decisionBody(r, explain, ids[i])
		}
		want := httptest.NewRecorder()
		if err := (gen.AuthorizeBatch200JSONResponse{Data: gen.AuthorizationBatch{Results: out}}).VisitAuthorizeBatchResponse(want); err != nil {
			t.Fatal(err)
		}
		got := httptest.NewRecorder()
		if err := (decisionsAnswer{explain: explain, results: cases, ids: ids}).VisitAuthorizeBatchResponse(got); err != nil {
			t.Fatal(err)
		}
		compareRecorded(t, got, want)
	}
}

func compareRecorded(t *testing.T, got, want *httptest.ResponseRecorder) {
	t.Helper()
	if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
		t.Errorf("status %d %q, want %d %q", got.Code, got.Header().Get("Content-Type"), want.Code, want.Header().Get("Content-Type"))
	}
	if got.Body.String() != want.Body.String() {
		t.Errorf("body\n%s\nwant\n%s", got.Body, want.Body)
	}
	// Declared, so that a batch's answer is not sent chunked.
	if cl := got.Header().Get("Content-Length"); cl != strconv.Itoa(got.Body.Len()) {
		t.Errorf("Content-Length %q, want %d (the body's length)", cl, got.Body.Len())
	}
}

// TestDecisionsAnswerLiteral: an explained batch of an allowed and a denied check, written out.
func TestDecisionsAnswerLiteral(t *testing.T) {
	at := time.Date(2026, 11, 26, 17, 0, 0, 500, time.UTC)
	a := decisionsAnswer{explain: true, ids: []string{"dec_1", "dec_2"}, results: []store.CheckResult{
		{Decision: store.Decision{Allowed: true, Roles: []string{"editor"}}, Bindings: []store.CheckedBinding{
			{BindingID: "rb_1", RoleID: "role_e", RoleSlug: "editor", Matched: "*"},
			{BindingID: "rb_2", RoleID: "role_o", RoleSlug: "old", ExpiresAt: &at, Expired: true, Matched: "*"},
		}},
		{Decision: store.Decision{Roles: []string{}}, Bindings: []store.CheckedBinding{
			{BindingID: "rb_2", RoleID: "role_o", RoleSlug: "old", ExpiresAt: &at, Expired: true, Matched: "doc:<read>"},
		}},
	}}
	got := httptest.NewRecorder()
	if err := a.VisitAuthorizeBatchResponse(got); err != nil {
		t.Fatal(err)
	}
	const want = `{"data":{"results":[` +
		`{"allowed":true,"decisionId":"dec_1","explanation":{"grantedBy":[{"bindingId":"rb_1","expiresAt":null,"matched":"*","roleId":"role_e","roleSlug":"editor"}]},"roles":["editor"]},` +
		`{"allowed":false,"decisionId":"dec_2","explanation":{"considered":[{"bindingId":"rb_2","expired":true,"expiresAt":"2026-11-26T17:00:00.0000005Z","roleSlug":"old"}],"reason":"bindings_expired"},"roles":[]}` +
		"]}}\n"
	if got.Code != 200 || got.Header().Get("Content-Type") != "application/json" || got.Body.String() != want {
		t.Errorf("%d %q\n%s\nwant\n%s", got.Code, got.Header().Get("Content-Type"), got.Body, want)
	}
}

// BenchmarkDecisionsAnswer measures writing a 100-check batch's answer, plain and explained,
// through the generated types (the former path: decisionBody, then encoding/json) and through
// decisionsAnswer, in one process so that the two are paired:
//
//	go test -run '^$' -bench DecisionsAnswer -benchmem -count 8 ./server/
func BenchmarkDecisionsAnswer(b *testing.B) {
	at := time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC)
	bindings := []store.CheckedBinding{
		{BindingID: "rb_01jd8x3q0f5m6z1v2c4k7r9t0w", RoleID: "role_01jd8x3q0f5m6z1v2c4k7r9t0x", RoleSlug: "editor", Matched: "document:read"},
		{BindingID: "rb_01jd8x3q0f5m6z1v2c4k7r9t0y", RoleID: "role_01jd8x3q0f5m6z1v2c4k7r9t0z", RoleSlug: "viewer", ExpiresAt: &at},
	}
	results := make([]store.CheckResult, 100)
	for i := range results { // half allowed, half denied (by the benchmark data's mix)
		results[i] = store.CheckResult{Decision: store.Decision{Allowed: i%2 == 0, Roles: []string{"editor", "viewer"}}, Bindings: bindings}
		if i%2 == 1 {
			results[i].Bindings = bindings[1:]
		}
	}
	ids := store.NewIDs("dec", len(results))
	for _, explain := range []bool{false, true} {
		name := "plain"
		if explain {
			name = "explain"
		}
		b.Run(name+"/generated", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out := make([]gen.AuthorizationDecision, len(results))
				for i, r := range results {
					out[i] = decisionBody(r, explain, ids[i])
				}
				w := httptest.NewRecorder()
				if err := (gen.AuthorizeBatch200JSONResponse{Data: gen.AuthorizationBatch{Results: out}}).VisitAuthorizeBatchResponse(w); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				if err := (decisionsAnswer{explain: explain, results: results, ids: ids}).VisitAuthorizeBatchResponse(w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
