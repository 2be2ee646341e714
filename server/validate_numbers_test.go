package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestNumbersBeyondDouble: a number whose exponent is too large for any double (or for
// math/big, which refuses exponents past about a million) is bad input, answered 400 with the
// member's path like any other invalid value, never a 500, and nothing is written.
func TestNumbersBeyondDouble(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app, ten := newUsageApp(t, b)
		env := ten.project.Environments[0].ID
		_, _, key := app.createKey(t, ten, `{"name":"sender","scopes":["usage:write","usage:read"]}`)
		for _, q := range []string{"1e10000000", "-1e10000000", "1e400", "1e-10000000", "1" + strings.Repeat("0", 400)} {
			p := postEvent(app, key, ten.project.ID, `{"eventId":"big","subjectId":"alice","environmentId":"`+env+`","meter":"api_call","quantity":`+q+`}`).
				wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
			if len(p.Errors) != 1 || !slices.Equal(p.Errors[0].Path, []string{"body", "quantity"}) {
				t.Errorf("quantity %s: errors %+v, want one at body.quantity", q, p.Errors)
			}
		}
		// The rest of the body is still judged: a bad meter beside the number is reported too.
		p := postEvent(app, key, ten.project.ID, `{"eventId":"big","subjectId":"alice","environmentId":"`+env+`","meter":"!","quantity":2e400}`).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		want := []FieldError{{Path: []string{"body", "quantity"}, Message: "must be a number between -1.8e308 and 1.8e308"}}
		if len(p.Errors) != 2 || !slices.ContainsFunc(p.Errors, func(e FieldError) bool { return slices.Equal(e.Path, []string{"body", "meter"}) }) ||
			!slices.ContainsFunc(p.Errors, func(e FieldError) bool { return e.Message == want[0].Message && slices.Equal(e.Path, want[0].Path) }) {
			t.Errorf("errors %+v, want %+v and one at body.meter", p.Errors, want)
		}
		// A body that is a number alone.
		postEvent(app, key, ten.project.ID, `1e10000000`).wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		// Nothing was written: the same event id with a valid quantity is new.
		var ack usageAck
		postEvent(app, key, ten.project.ID, `{"eventId":"big","subjectId":"alice","environmentId":"`+env+`","meter":"api_call","quantity":1}`).
			decode(t, http.StatusCreated, &ack)
	})
}
