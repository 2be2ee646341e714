package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/oapi-codegen/runtime"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// TestBindDecisionBodies holds the hand-written binders of the decision bodies (bind.go) to
// runtime.BindJSONValue's result and to literal structs, and fails when the generated structs
// gain a member they would drop.
func TestBindDecisionBodies(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[gen.AuthorizeBatchRequest](): 3,
		reflect.TypeFor[gen.AuthorizeCheck]():        3,
		reflect.TypeFor[gen.AuthorizeRequest]():      5,
	} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, bind.go binds %d: bind the new ones", typ, typ.NumField(), n)
		}
	}
	yes := true
	batch, ok := decodeJSONDocument([]byte(`{"projectId":"prj_1","explain":true,"checks":[
		{"principalType":"user","principalId":"u1","permission":"doc:read"},
		{"principalType":"service_account","principalId":"sa_2","permission":"*"}]}`))
	if !ok {
		t.Fatal("batch body not decoded")
	}
	wantBatch := gen.AuthorizeBatchRequest{ProjectId: "prj_1", Explain: &yes, Checks: []gen.AuthorizeCheck{
		{PrincipalType: "user", PrincipalId: "u1", Permission: "doc:read"},
		{PrincipalType: "service_account", PrincipalId: "sa_2", Permission: "*"},
	}}
	var got, viaLib gen.AuthorizeBatchRequest
	if !bindAuthorizeBatch(batch, &got) || !reflect.DeepEqual(got, wantBatch) {
		t.Errorf("batch: got %+v, want %+v", got, wantBatch)
	}
	if err := runtime.BindJSONValue(batch, &viaLib); err != nil || !reflect.DeepEqual(got, viaLib) {
		t.Errorf("batch: hand-bound %+v, BindJSONValue %+v (%v)", got, viaLib, err)
	}

	for _, body := range []string{
		`{"projectId":"prj_1","principalType":"user","principalId":"u1","permission":"doc:read"}`,
		`{"projectId":"prj_1","principalType":"user","principalId":"u1","permission":"doc:read","explain":false}`,
	} {
		v, _ := decodeJSONDocument([]byte(body))
		var got, viaLib gen.AuthorizeRequest
		if !bindAuthorize(v, &got) || got.ProjectId != "prj_1" || got.PrincipalType != "user" || got.PrincipalId != "u1" || got.Permission != "doc:read" {
			t.Errorf("%s: got %+v", body, got)
		}
		if err := runtime.BindJSONValue(v, &viaLib); err != nil || !reflect.DeepEqual(got, viaLib) {
			t.Errorf("%s: hand-bound %+v, BindJSONValue %+v (%v)", body, got, viaLib, err)
		}
	}

	// A value of another shape binds nothing and leaves the destination as it was.
	for _, body := range []string{`{"projectId":"p","checks":{}}`, `{"projectId":1,"checks":[]}`, `[]`,
		`{"projectId":"p","checks":[{"principalType":"user","principalId":2,"permission":"a:b"}]}`,
		`{"projectId":"p","checks":[],"explain":"yes"}`} {
		v, _ := decodeJSONDocument([]byte(body))
		keep := gen.AuthorizeBatchRequest{ProjectId: "before"}
		if bindAuthorizeBatch(v, &keep) || keep.ProjectId != "before" {
			t.Errorf("%s: bound %+v", body, keep)
		}
	}
}

// TestValidatedBodyIsBound: a body the validator accepted and decoded (one the streamed check
// does not judge: here for its \u escape) reaches the strict handler's binding as the value it
// validated (not decoded again), and its bytes stay readable; a body that is not a
// validatedBody is decoded by echo.
func TestValidatedBodyIsBound(t *testing.T) {
	doc := loadTestSpec(t)
	v, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	const body = `{"projectId":"prj_1","checks":[{"principalType":"user","principalId":"u\u0031","permission":"doc:read"}]}`
	req := httptest.NewRequest(http.MethodPost, "/api/v1/authorize/batch", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	value, errs, err := validateBody(req, v.bodies["authorizeBatch"])
	if err != nil || len(errs) > 0 {
		t.Fatalf("valid batch refused: %v %v", err, errs)
	}
	vb, ok := req.Body.(*validatedBody)
	if !ok || !reflect.DeepEqual(vb.ValidatedValue(), value) {
		t.Fatalf("body after validation is %T, want *validatedBody holding the validated value", req.Body)
	}
	// The binder takes the value: change it, and the bound struct follows.
	value.(map[string]any)["projectId"] = "prj_from_value"
	var got gen.AuthorizeBatchRequest
	c := echo.New().NewContext(req, httptest.NewRecorder())
	if err := (&bodyBinder{}).Bind(&got, c); err != nil || got.ProjectId != "prj_from_value" || len(got.Checks) != 1 || got.Checks[0].PrincipalId != "u1" {
		t.Errorf("bound %+v (%v), want projectId prj_from_value and one check of u1", got, err)
	}
	if raw, _ := io.ReadAll(req.Body); string(raw) != body {
		t.Errorf("body bytes %q, want %q", raw, body)
	}

	plain := httptest.NewRequest(http.MethodPost, "/api/v1/authorize/batch", strings.NewReader(body))
	plain.Header.Set("Content-Type", "application/json")
	var decoded gen.AuthorizeBatchRequest
	if err := (&bodyBinder{}).Bind(&decoded, echo.New().NewContext(plain, httptest.NewRecorder())); err != nil || decoded.ProjectId != "prj_1" {
		t.Errorf("plain body bound %+v (%v), want projectId prj_1", decoded, err)
	}
}

// TestStreamedBodyIsBound: a decision body the streamed check accepted is never decoded whole:
// validation hands on its bytes (streamedBody), the authorization stage reads its projectId from
// them, the binder binds them by hand into what BindJSONValue makes of the decoded body, and
// they stay readable.
func TestStreamedBodyIsBound(t *testing.T) {
	v := fastValidator(t)
	const body = `{"checks":[{"principalType":"user","principalId":"u1","permission":"doc:read"},` +
		`{"permission":"*","principalId":"sa \"2\"","principalType":"service_account"}],"explain":false,"projectId":"prj_5e1"}`
	req := httptest.NewRequest(http.MethodPost, "/api/v1/authorize/batch", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	value, errs, err := validateBody(req, v.bodies["authorizeBatch"])
	if err != nil || len(errs) > 0 {
		t.Fatalf("valid batch refused: %v %v", err, errs)
	}
	sb, ok := value.(streamedBody)
	if !ok || string(sb) != body {
		t.Fatalf("validated body is %T %q, want the streamedBody of the request's bytes", value, value)
	}
	m := &matchedRoute{body: value}
	if got := m.bodyMember("projectId"); got != "prj_5e1" {
		t.Errorf("bodyMember(projectId) = %v, want prj_5e1", got)
	}
	if got := m.bodyMember("absent"); got != nil {
		t.Errorf("bodyMember(absent) = %v, want nil", got)
	}
	if got, ok := m.bodyMember("checks").([]any); !ok || len(got) != 2 {
		t.Errorf("bodyMember(checks) = %v, want its two checks", got)
	}
	vb, ok := req.Body.(*validatedBody)
	if !ok || vb.ValidatedValue() != nil {
		t.Fatalf("body after validation is %T, want *validatedBody with no decoded value", req.Body)
	}
	var got gen.AuthorizeBatchRequest
	if err := (&bodyBinder{}).Bind(&got, echo.New().NewContext(req, httptest.NewRecorder())); err != nil {
		t.Fatal(err)
	}
	no := false
	want := gen.AuthorizeBatchRequest{ProjectId: "prj_5e1", Explain: &no, Checks: []gen.AuthorizeCheck{
		{PrincipalType: "user", PrincipalId: "u1", Permission: "doc:read"},
		{PrincipalType: "service_account", PrincipalId: `sa "2"`, Permission: "*"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bound %+v, want %+v", got, want)
	}
	if raw, _ := io.ReadAll(req.Body); string(raw) != body {
		t.Errorf("body bytes %q, want %q", raw, body)
	}
}

// TestBindDecisionBytes holds bindDecisionBytes to literal structs and to BindJSONValue over the
// decoded bodies, and checks that any other shape binds nothing.
func TestBindDecisionBytes(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		body string
		want any
	}{
		{`{"projectId":"prj_1","explain":true,"checks":[{"principalType":"user","principalId":"u1","permission":"doc:read"},` +
			`{"principalType":"service_account","principalId":"sa_2","permission":"*"}]}`,
			&gen.AuthorizeBatchRequest{ProjectId: "prj_1", Explain: &yes, Checks: []gen.AuthorizeCheck{
				{PrincipalType: "user", PrincipalId: "u1", Permission: "doc:read"},
				{PrincipalType: "service_account", PrincipalId: "sa_2", Permission: "*"}}}},
		{`{"checks":[{"permission":"a:b","principalId":"日本\t","principalType":"user"}],"projectId":"p\/q"}`,
			&gen.AuthorizeBatchRequest{ProjectId: "p/q", Checks: []gen.AuthorizeCheck{{PrincipalType: "user", PrincipalId: "日本\t", Permission: "a:b"}}}},
		{`{"projectId":"prj_1","principalType":"user","principalId":"u1","permission":"doc:read"}`,
			&gen.AuthorizeRequest{ProjectId: "prj_1", PrincipalType: "user", PrincipalId: "u1", Permission: "doc:read"}},
		{`{"explain":false,"permission":"*","principalId":"x","principalType":"service_account","projectId":"p"}`,
			&gen.AuthorizeRequest{ProjectId: "p", PrincipalType: "service_account", PrincipalId: "x", Permission: "*", Explain: &no}},
	} {
		got := reflect.New(reflect.TypeOf(tc.want).Elem()).Interface()
		viaLib := reflect.New(reflect.TypeOf(tc.want).Elem()).Interface()
		if !bindDecisionBytes([]byte(tc.body), got) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: bound %+v, want %+v", tc.body, got, tc.want)
		}
		v, _ := decodeJSONDocument([]byte(tc.body))
		if err := runtime.BindJSONValue(v, viaLib); err != nil || !reflect.DeepEqual(got, viaLib) {
			t.Errorf("%s: bound %+v, BindJSONValue %+v (%v)", tc.body, got, viaLib, err)
		}
	}
	for _, body := range []string{`{"projectId":"p","checks":{}}`, `{"projectId":1,"checks":[]}`, `[]`, `{"projectId":"p"}`,
		`{"projectId":"p","checks":[{"principalType":"user","principalId":2,"permission":"a:b"}]}`,
		`{"projectId":"p","checks":[],"explain":"yes"}`, `{"projectId":"p","checks":[],"other":1}`,
		`{"projectId":"p","checks":[{"principalType":"user","principalId":"u","permission":"a:b","x":1}]}`,
		`{"projectId":"p","checks":[]} {}`, `{"projectId":"p","checks":[]`, `{"proj\u0065ctId":"p","checks":[]}`} {
		keep := gen.AuthorizeBatchRequest{ProjectId: "before"}
		if bindDecisionBytes([]byte(body), &keep) || keep.ProjectId != "before" {
			t.Errorf("%s: bound %+v", body, keep)
		}
	}
	var other gen.UsageEventBatch
	if bindDecisionBytes([]byte(`{}`), &other) {
		t.Error("bound a body of another operation")
	}
}
