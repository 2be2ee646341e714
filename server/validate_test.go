package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// validationSpec exercises both of kin-openapi's validators: the referenced Widget schema goes
// through its OpenAPI validator, the inline Gadget (with const) through JSON Schema 2020-12.
const validationSpec = `
openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /widgets/{id}:
    post:
      operationId: postWidget
      parameters:
        - {name: id, in: path, required: true, schema: {type: string, pattern: "^w_[a-z]+$"}}
        - {name: days, in: query, schema: {type: integer, minimum: 7, maximum: 90}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Widget"}
      responses: {"200": {description: ok}}
  /gadgets:
    post:
      operationId: postGadget
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              required: [kind, scopes]
              properties:
                kind: {const: gadget}
                scopes: {type: array, minItems: 1, items: {type: string, pattern: "^[a-z]+:[a-z]+$"}}
                name: {type: string, maxLength: 5}
      responses: {"200": {description: ok}}
components:
  schemas:
    Widget:
      type: object
      additionalProperties: false
      required: [name, scopes]
      properties:
        name: {type: string, minLength: 1}
        scopes: {type: array, minItems: 1, items: {type: string}}
        state: {type: string, enum: [active, archived]}
`

func TestFieldErrors(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(validationSpec))
	if err != nil {
		t.Fatal(err)
	}
	v, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, target, body string
		want               []FieldError
	}{
		{"empty scopes and unknown field", "/widgets/w_abc", `{"name":"n","scopes":[],"extra":1}`, []FieldError{
			{Path: []string{"body", "scopes"}, Message: "must have at least 1 item"},
			{Path: []string{"body", "extra"}, Message: "is not allowed"},
		}},
		{"missing required", "/widgets/w_abc", `{"scopes":["a"]}`, []FieldError{
			{Path: []string{"body", "name"}, Message: "is required"},
		}},
		{"enum and type", "/widgets/w_abc", `{"name":5,"scopes":["a"],"state":"gone"}`, []FieldError{
			{Path: []string{"body", "name"}, Message: "must be a string"},
			{Path: []string{"body", "state"}, Message: "must be one of active, archived"},
		}},
		{"path and query parameters", "/widgets/W-1?days=3", `{"name":"n","scopes":["a"]}`, []FieldError{
			{Path: []string{"path", "id"}, Message: "must match the pattern ^w_[a-z]+$"},
			{Path: []string{"query", "days"}, Message: "must be at least 7"},
		}},
		{"not json", "/widgets/w_abc", `{"name":`, []FieldError{
			{Path: []string{"body"}, Message: "is not valid JSON"},
		}},
		{"2020-12 nested item pattern and const", "/gadgets", `{"kind":"x","scopes":["ok:ok","BAD"],"name":"toolong"}`, []FieldError{
			{Path: []string{"body", "kind"}, Message: "must be gadget"},
			{Path: []string{"body", "name"}, Message: "must be at most 5 characters long"},
			{Path: []string{"body", "scopes", "1"}, Message: "must match the pattern ^[a-z]+:[a-z]+$"},
		}},
		{"2020-12 required", "/gadgets", `{}`, []FieldError{
			{Path: []string{"body", "kind"}, Message: "is required"},
			{Path: []string{"body", "scopes"}, Message: "is required"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", tc.target, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			path, params := "/gadgets", map[string]string(nil)
			if id, ok := strings.CutPrefix(req.URL.Path, "/widgets/"); ok {
				path, params = "/widgets/{id}", map[string]string{"id": id}
			}
			_, got, err := v.check(req, v.route(path, "POST"), params)
			if err != nil {
				t.Fatal(err)
			}
			if !sameErrors(got, tc.want) {
				t.Fatalf("errors = %+v\nwant %+v", got, tc.want)
			}
			for _, fe := range got {
				if strings.Contains(fe.Message, "BAD") || strings.Contains(fe.Message, "toolong") || strings.Contains(fe.Message, "gone") {
					t.Errorf("message echoes the submitted value: %q", fe.Message)
				}
			}
		})
	}
}

// sameErrors compares as sets: the validators do not promise an order.
func sameErrors(got, want []FieldError) bool {
	if len(got) != len(want) {
		return false
	}
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && reflect.DeepEqual(g, w) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestReadBody: readBody reads a body whole whatever its declared length says of it: declared
// and under the presized buffer, declared and over it, not declared (chunked), empty; and
// what the body's reader answered before failing, with its error.
func TestReadBody(t *testing.T) {
	small := strings.Repeat("a", 300)
	large := strings.Repeat("b", presizeLimit*2+7)
	for _, tc := range []struct {
		name     string
		body     string
		declared int64
	}{
		{"declared, small", small, int64(len(small))},
		{"declared, over the presized buffer", large, int64(len(large))},
		{"not declared", large, -1},
		{"empty", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			req.ContentLength = tc.declared
			got, err := readBody(req)
			if err != nil || string(got) != tc.body {
				t.Errorf("read %d bytes (%v), want the %d of the body", len(got), err, len(tc.body))
			}
		})
	}
	t.Run("a failing reader", func(t *testing.T) {
		cut := errors.New("connection reset")
		req := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader(small), errReader{cut}))
		req.ContentLength = int64(len(small)) + 100
		got, err := readBody(req)
		if !errors.Is(err, cut) || string(got) != small {
			t.Errorf("read %d bytes (%v), want the %d read and %v", len(got), err, len(small), cut)
		}
	})
}
