package server

import (
	"github.com/labstack/echo/v4"
	"github.com/oapi-codegen/runtime"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// bodyBinder binds the strict handlers' request bodies, as the generated code does with echo's
// DefaultBinder (the body only, never path or query parameters): a body the validator decoded
// and validated (validatedBody) is bound from that value, matching member names exactly
// (runtime.BindJSONValue), anything else is decoded by echo. The two authorization decision
// bodies, whose 1 to 100 checks are the API's hottest input, are bound by hand instead: the
// validator has already checked every member's type, and the reflection of BindJSONValue was a
// tenth of a 100-check batch's cost. TestBindDecisionBodies holds them to BindJSONValue's result
// and fails when the generated structs gain a member this file does not bind.
type bodyBinder struct{ echo.DefaultBinder }

// Bind binds request body into i.
func (b *bodyBinder) Bind(i any, c echo.Context) error {
	if vb, ok := c.Request().Body.(*validatedBody); ok {
		if vb.value == nil && vb.raw != nil {
			// Accepted by the streamed check (validate_stream.go): bound from its bytes.
			if bindDecisionBytes(vb.raw, i) {
				return nil
			}
			var ok bool
			if vb.value, ok = decodeJSONDocument(vb.raw); !ok {
				return b.BindBody(c, i)
			}
		}
		switch dst := i.(type) {
		case *gen.AuthorizeBatchJSONRequestBody:
			if bindAuthorizeBatch(vb.value, dst) {
				return nil
			}
		case *gen.AuthorizeJSONRequestBody:
			if bindAuthorize(vb.value, dst) {
				return nil
			}
		}
		if runtime.BindJSONValue(vb.value, i) == nil {
			return nil
		}
	}
	return b.BindBody(c, i)
}

// bindAuthorizeBatch binds a validated AuthorizeBatchRequest; ok is false (dst untouched) when v
// does not have its shape.
func bindAuthorizeBatch(v any, dst *gen.AuthorizeBatchRequest) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	var out gen.AuthorizeBatchRequest
	if out.ProjectId, ok = obj["projectId"].(string); !ok {
		return false
	}
	if out.Explain, ok = optionalBool(obj, "explain"); !ok {
		return false
	}
	checks, ok := obj["checks"].([]any)
	if !ok {
		return false
	}
	out.Checks = make([]gen.AuthorizeCheck, len(checks))
	for i, c := range checks {
		m, ok := c.(map[string]any)
		if !ok {
			return false
		}
		typ, ok1 := m["principalType"].(string)
		id, ok2 := m["principalId"].(string)
		perm, ok3 := m["permission"].(string)
		if !ok1 || !ok2 || !ok3 {
			return false
		}
		out.Checks[i] = gen.AuthorizeCheck{PrincipalType: gen.PrincipalType(typ), PrincipalId: id, Permission: perm}
	}
	*dst = out
	return true
}

// bindAuthorize binds a validated AuthorizeRequest; ok is false (dst untouched) when v does not
// have its shape.
func bindAuthorize(v any, dst *gen.AuthorizeRequest) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	var out gen.AuthorizeRequest
	typ, ok1 := obj["principalType"].(string)
	id, ok2 := obj["principalId"].(string)
	perm, ok3 := obj["permission"].(string)
	project, ok4 := obj["projectId"].(string)
	explain, ok5 := optionalBool(obj, "explain")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return false
	}
	out.PrincipalType, out.PrincipalId, out.Permission, out.ProjectId, out.Explain = gen.PrincipalType(typ), id, perm, project, explain
	*dst = out
	return true
}

// optionalBool reads an optional boolean member: nil when absent or null, as encoding/json
// leaves a *bool.
func optionalBool(obj map[string]any, name string) (*bool, bool) {
	switch v := obj[name].(type) {
	case nil:
		return nil, true
	case bool:
		return &v, true
	}
	return nil, false
}
