package server

import (
	"net/http"

	"github.com/oapi-codegen/nullable"
)

// JSON nulls of the wire forms: one helper per way a Go value becomes an explicit null.

// nullableOf renders an optional value as the value, or an explicit null for a nil pointer.
func nullableOf[T any](v *T) nullable.Nullable[T] {
	if v == nil {
		return nullable.NewNullNullable[T]()
	}
	return nullable.NewNullableWithValue(*v)
}

// nullableString renders "" as an explicit null.
func nullableString(s string) nullable.Nullable[string] {
	if s == "" {
		return nullable.NewNullNullable[string]()
	}
	return nullable.NewNullableWithValue(s)
}

// ptrValue is *v, or nil (JSON null) for a nil pointer: for map[string]any bodies such as audit
// metadata.
func ptrValue[T any](v *T) any {
	if v == nil {
		return nil
	}
	return *v
}

// jsonNull is a 200 whose body is the JSON literal null, which the generated response types
// cannot express: better-auth's answer when there is nothing to show (get-session signed out,
// set-active-organization with null, get-full-organization without an active organization).
type jsonNull struct{}

func (jsonNull) write(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write([]byte("null\n"))
	return err
}

// VisitGetSessionResponse implements gen.GetSessionResponseObject.
func (n jsonNull) VisitGetSessionResponse(w http.ResponseWriter) error { return n.write(w) }

// VisitAuthSetActiveOrganizationResponse implements gen.AuthSetActiveOrganizationResponseObject.
func (n jsonNull) VisitAuthSetActiveOrganizationResponse(w http.ResponseWriter) error {
	return n.write(w)
}

// VisitAuthGetFullOrganizationResponse implements gen.AuthGetFullOrganizationResponseObject.
func (n jsonNull) VisitAuthGetFullOrganizationResponse(w http.ResponseWriter) error {
	return n.write(w)
}
