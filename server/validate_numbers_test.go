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

// TestMayHoldHugeNumber: the filter before numberRangeErrors holds for every number with an
// exponent or of more than 308 digits, and not for what only a string holds.
func TestMayHoldHugeNumber(t *testing.T) {
	long := strings.Repeat("9", 309)
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"quantity":1e5}`, true},
		{`{"quantity":-2.5E-3}`, true},
		{`{"quantity":1.e5}`, true},
		{`[1,2,3e400]`, true},
		{`1e10000000`, true},
		{`{"quantity":` + long + `}`, true},
		{`{"quantity":` + long[:308] + `}`, false},
		{`{"quantity":` + long[:200] + `.` + long[:200] + `}`, true},
		{`{"quantity":1,"meter":"api_call"}`, false},
		{`{"projectId":"prj_01m8e9rb73ynzxzcbfvge96c5v"}`, false},
		{`{"eventId":"1e5"}`, false},
		{`{"eventId":"` + long + `"}`, false},
		{`{"eventId":"a\"1e5","n":2}`, false},
		{`{"eventId":"a\\","n":2e9}`, true},
		{`{"a\"b":"1e5","n":7}`, false},
	} {
		if got := mayHoldHugeNumber([]byte(tc.body)); got != tc.want {
			t.Errorf("mayHoldHugeNumber(%.60s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
