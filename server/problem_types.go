package server

import (
	"context"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// problemType is what the page at a problem's type URI ({base_url}/problems/<kind>) says about
// that kind, as RFC 9457 section 3.1.1 intends: a person who follows the type URI of an error
// they got learns what it means and what to do.
type problemType struct {
	// Status is the HTTP status problems of this kind carry; 0 when it varies (http-4xx).
	Status int
	// Title is the usual title; a problem's own title may be more specific.
	Title string
	// Description says what the problem means and what to do about it.
	Description string
	// Retry tells whether the same request may succeed later (with backoff).
	Retry bool
}

// problemTypes describes every kind the server emits (the kind constants in problem.go). A
// test walks the kinds in the source of server/ and identity/ and fails when one has no entry.
var problemTypes = map[string]problemType{
	kindValidation: {Status: http.StatusBadRequest, Title: titleValidation,
		Description: "The request did not match the API's schema. The problem's errors list each issue: its path " +
			"(starting with body, query, path or header) and a message. Fix the request; sending it again unchanged fails the same way."},
	kindUnauthorized: {Status: http.StatusUnauthorized, Title: titleUnauthenticated,
		Description: "The request carried no usable credential: no API key or session, or one that is malformed, revoked, " +
			"expired or disabled. Sign in again or use a valid API key (Authorization: Bearer …)."},
	kindForbidden: {Status: http.StatusForbidden, Title: titlePermissionDenied,
		Description: "The caller is authenticated but not allowed to do this: its role lacks the permission, a service " +
			"account's key is scoped to another environment, the route needs a user session, or a cookie write came " +
			"from an origin that is not trusted. The problem's title says which."},
	kindNotFound: {Status: http.StatusNotFound, Title: titleNotFound,
		Description: "Nothing with that id exists, or the caller may not see it. Gatehouse answers both the same way so " +
			"that ids cannot be probed."},
	kindConflict: {Status: http.StatusConflict, Title: titleConflict,
		Description: "The request clashes with what exists: a name or slug is taken, the record is still in use, or it " +
			"is archived and must be restored first. The title says which; change the request rather than retrying it."},
	kindClientError: {Title: "Client error",
		Description: "Any other client error, with its own status: 405 (the Allow header lists the methods), 408 (the body " +
			"arrived too slowly), 413 (the body is over the limit), 422, 429 (wait for Retry-After), and 400s such as " +
			"Limit exceeded or Invalid request. The title says which."},
	kindTwoFactorRequired: {Status: http.StatusForbidden, Title: titleTwoFactorRequired,
		Description: "The organization requires two-factor authentication and the signed-in user has not enrolled a " +
			"second factor. Enable it at /api/auth/two-factor/enable, then try again."},
	kindBadGateway: {Status: http.StatusBadGateway, Title: "Bad gateway",
		Description: "A service Gatehouse called on your behalf (the payment processor) refused or failed the request. " +
			"Check the processor's connection and dashboard, then try again."},
	kindUnavailable: {Status: http.StatusServiceUnavailable, Title: titleUnavailable, Retry: true,
		Description: "Gatehouse cannot reach its database, or the request's work ran out of time. Retry after the " +
			"Retry-After header's seconds, with backoff."},
	kindInternal: {Status: http.StatusInternalServerError, Title: titleInternal, Retry: true,
		Description: "Something failed inside Gatehouse. The cause is logged with the problem's requestId and never " +
			"sent; give that id to the operator. Retrying with backoff may succeed."},
}

// problemTypeView is what pages/problem.html shows.
type problemTypeView struct {
	problemType
	Kind, URI string
}

// GetProblemType serves the page (or, for Accept: application/json, the JSON) describing one
// problem kind; an unknown kind is 404.
func (s *Server) GetProblemType(ctx context.Context, request gen.GetProblemTypeRequestObject) (gen.GetProblemTypeResponseObject, error) {
	t, ok := problemTypes[request.Kind]
	if !ok {
		return nil, ErrNotFound
	}
	uri := s.cfg.BaseURL + "/problems/" + request.Kind
	vary := "Accept"
	headers := gen.GetProblemType200ResponseHeaders{Vary: &vary}
	if accept := requestMetaFrom(ctx).Accept; acceptsJSON(accept) && !wantsPage(ctx) {
		out := gen.GetProblemType200JSONResponse{Headers: headers}
		out.Body.Data = gen.ProblemType{Type: uri, Kind: request.Kind, Title: t.Title,
			Description: t.Description, Retry: t.Retry}
		if t.Status != 0 {
			out.Body.Data.Status = &t.Status
		}
		return out, nil
	}
	body, n, err := s.renderAccountPage(ctx, pageProblem, accountPage{Title: t.Title,
		Problem: &problemTypeView{problemType: t, Kind: request.Kind, URI: uri}})
	if err != nil {
		return nil, err
	}
	return gen.GetProblemType200TexthtmlResponse{Body: body, ContentLength: n, Headers: headers}, nil
}
