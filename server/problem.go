package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Problem kinds: the last segment of a problem's type URI, {base_url}/problems/<kind>.
const (
	kindValidation   = "validation"
	kindUnauthorized = "http-401"
	kindForbidden    = "http-403"
	kindNotFound     = "http-404"
	kindConflict     = "conflict"
	kindClientError  = "http-4xx"
	kindUnavailable  = "unavailable"
	kindInternal     = "internal"
	// kindTwoFactorRequired: the organization requires a second factor the user has not enrolled.
	kindTwoFactorRequired = "two-factor-required"
	// kindBadGateway: a service Gatehouse called on the caller's behalf (the payment
	// processor) refused or failed.
	kindBadGateway = "http-502"
)

// Titles fixed by the interface. Clients match on type and status, never on title.
const (
	titleValidation        = "Validation failed"
	titleUnauthenticated   = "Authentication required"
	titlePermissionDenied  = "Permission denied"
	titleUserRequired      = "A user session is required"
	titleEnvironmentScoped = "Service account is scoped to another environment"
	titleNotFound          = "Not found"
	titleConflict          = "Conflict"
	titleUnavailable       = "Service unavailable"
	titleInUse             = "Still in use"
	titleRecordArchived    = "Archived; restore it first"
	titleLimit             = "Limit exceeded"
	titleInvalid           = "Invalid request"
	titleBodyTooLarge      = "Request body too large"
	titleInternal          = "Internal server error"
	titleTwoFactorRequired = "Two-factor authentication required"
)

// FieldError is one validation issue: where (path segments starting with body, query, path or
// header) and what is wrong. Messages never echo the submitted value.
type FieldError struct {
	Path    []string `json:"path"`
	Message string   `json:"message"`
}

// Error is the one error type handlers and middleware return for an expected failure. The
// error handler turns it into an application/problem+json body; nothing else writes problems.
// Title must be safe to show: it never carries a secret or an internal error text.
type Error struct {
	Status int
	Kind   string
	Title  string
	Errors []FieldError
	// Code and Message are the better-auth error members that /api/auth clients read.
	Code    string
	Message string
	// Detail is the RFC 9457 detail: what this occurrence needed, when a title alone leaves the
	// caller guessing. Safe to show, like Title.
	Detail string
	// Header is added to the response (for example Retry-After or Allow).
	Header http.Header
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Kind, e.Title) }

// Problem constructors for the failures every area shares.
var (
	ErrUnauthenticated = &Error{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Title: titleUnauthenticated}
	ErrPermission      = &Error{Status: http.StatusForbidden, Kind: kindForbidden, Title: titlePermissionDenied}
	ErrUserRequired    = &Error{Status: http.StatusForbidden, Kind: kindForbidden, Title: titleUserRequired}
	ErrEnvScoped       = &Error{Status: http.StatusForbidden, Kind: kindForbidden, Title: titleEnvironmentScoped}
	// ErrTwoFactorRequired refuses a member without a second factor in an organization that
	// requires one. Its detail names the hosted account page, where they enrol (the hosted
	// sign-in sends them there; a JSON sign-in starts a session as better-auth's does).
	ErrTwoFactorRequired = &Error{Status: http.StatusForbidden, Kind: kindTwoFactorRequired, Title: titleTwoFactorRequired,
		Detail: "This organization requires two-factor authentication: turn it on at /api/auth/account (the account page: TOTP or a passkey; or with /api/auth/two-factor/enable), then try again."}
	ErrNotFound    = &Error{Status: http.StatusNotFound, Kind: kindNotFound, Title: titleNotFound}
	ErrUnavailable = &Error{Status: http.StatusServiceUnavailable, Kind: kindUnavailable, Title: titleUnavailable,
		Header: http.Header{"Retry-After": []string{"5"}}}
)

// Conflict is a 409 /problems/conflict with a title saying what already exists.
func Conflict(title string) *Error {
	return &Error{Status: http.StatusConflict, Kind: kindConflict, Title: title}
}

// Validation is a 400 /problems/validation listing the issues, ordered by path (array indices
// as numbers) so that clients see the same order for the same input: kin-openapi reports a
// body's issues in map order.
func Validation(errs ...FieldError) *Error {
	errs = slices.Clone(errs)
	slices.SortStableFunc(errs, func(a, b FieldError) int { return comparePaths(a.Path, b.Path) })
	return &Error{Status: http.StatusBadRequest, Kind: kindValidation, Title: titleValidation, Errors: errs}
}

// comparePaths orders error paths segment by segment, two array indices as numbers and
// anything else as text; a path sorts before the paths it prefixes.
func comparePaths(a, b []string) int {
	for i := range min(len(a), len(b)) {
		c := strings.Compare(a[i], b[i])
		if x, err := strconv.Atoi(a[i]); err == nil {
			if y, err := strconv.Atoi(b[i]); err == nil {
				c = cmp.Compare(x, y)
			}
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// ClientError is a 4xx /problems/http-4xx for any other client error.
func ClientError(status int, title string) *Error {
	return &Error{Status: status, Kind: kindClientError, Title: title}
}

// authCode is the better-auth error code for a status without a more specific one.
func authCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "VALIDATION_ERROR"
	case http.StatusUnauthorized:
		return "UNAUTHORIZED"
	case http.StatusForbidden:
		return "FORBIDDEN"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "CONFLICT"
	case http.StatusTooManyRequests:
		return "TOO_MANY_REQUESTS"
	case http.StatusInternalServerError:
		return "INTERNAL_SERVER_ERROR"
	}
	return strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
}

// problemBody is the wire form of a problem.
type problemBody struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
	RequestID string       `json:"requestId,omitempty"`
	Code      string       `json:"code,omitempty"`
	Message   string       `json:"message,omitempty"`
}

// errorHandler is echo's HTTPErrorHandler: the single place that maps errors to problem+json.
// Expected failures arrive as *Error, routing and framework failures as *echo.HTTPError, store
// lookups as store sentinels; anything else is a 500 whose text is logged, never sent.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := s.toProblem(err, c)
	surface := surfaceOf(c)
	if surface == surfaceAuthJSON && p.Code == "" {
		// better-auth clients read code and message.
		cp := *p
		cp.Code, cp.Message = authCode(p.Status), p.Title
		p = &cp
	}
	for k, vs := range p.Header {
		for _, v := range vs {
			c.Response().Header().Add(k, v)
		}
	}
	body := problemBody{
		Type:      s.cfg.BaseURL + "/problems/" + p.Kind,
		Title:     p.Title,
		Status:    p.Status,
		Detail:    p.Detail,
		Errors:    p.Errors,
		RequestID: RequestID(c.Request().Context()),
		Code:      p.Code,
		Message:   p.Message,
	}
	var payload any = body
	contentType := "application/problem+json"
	if surface == surfaceProtocol {
		// OAuth clients read RFC 6749 error bodies, not problems.
		payload, contentType = oauthErrorBody(p), echo.MIMEApplicationJSON
	}
	c.Response().Header().Set(echo.HeaderContentType, contentType)
	c.Response().Header().Set("Cache-Control", "no-store")
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(p.Status)
		return
	}
	c.Response().WriteHeader(p.Status)
	if werr := jsonEncode(c.Response(), payload); werr != nil {
		s.log.DebugContext(c.Request().Context(), "write problem", "err", werr)
	}
}

// invalidOrigin refuses an unsafe request whose Origin (or Referer) is not trusted, saying what
// was expected: the base URL, and whether trusted origins are configured (never which). An
// operator who changed only GATEHOUSE_LISTEN_ADDR sees why every cookie write fails.
func (s *Server) invalidOrigin() *Error {
	e := authError(http.StatusForbidden, kindForbidden, "INVALID_ORIGIN", "Invalid origin")
	e.Detail = "The Origin (or Referer) must be the base URL " + s.cfg.BaseURL + " (GATEHOUSE_BASE_URL)"
	if len(s.cfg.TrustedOrigins) > 0 {
		e.Detail += " or one of the trusted origins (GATEHOUSE_TRUSTED_ORIGINS)."
	} else {
		e.Detail += "; no trusted origins are configured (GATEHOUSE_TRUSTED_ORIGINS)."
	}
	return e
}

// oauthError is an RFC 6749 section 5.2 error body.
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// oauthErrorBody renders a failure that reached the error handler from a protocol route
// (fosite writes the protocol's own errors itself; these are the pipeline's: a panic, an
// outage, a body over the limit) as RFC 6749 does.
func oauthErrorBody(p *Error) oauthError {
	switch {
	case p.Status == http.StatusUnauthorized:
		return oauthError{Error: "invalid_client", Description: p.Title}
	case p.Status == http.StatusServiceUnavailable:
		return oauthError{Error: "temporarily_unavailable", Description: p.Title}
	case p.Status >= 500:
		return oauthError{Error: "server_error", Description: p.Title}
	}
	return oauthError{Error: "invalid_request", Description: p.Title}
}

func (s *Server) toProblem(err error, c echo.Context) *Error {
	var pe *Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &he):
		return s.fromHTTPError(he, c)
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, store.ErrConflict):
		return Conflict(titleConflict)
	case errors.Is(err, store.ErrInUse):
		return Conflict(titleInUse)
	case errors.Is(err, store.ErrArchived):
		return Conflict(titleRecordArchived)
	case errors.Is(err, store.ErrLimit):
		return ClientError(http.StatusBadRequest, titleLimit)
	case errors.Is(err, store.ErrInvalid):
		return ClientError(http.StatusBadRequest, titleInvalid)
	case errors.Is(err, store.ErrUnavailable):
		s.log.WarnContext(c.Request().Context(), "database unavailable",
			"err", err, "route", c.Path(), "request_id", RequestID(c.Request().Context()))
		return ErrUnavailable
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection's read deadline passed while the body was still arriving (ReadTimeout):
		// the client is slow, the server is fine.
		s.log.WarnContext(c.Request().Context(), "request body read timed out",
			"method", c.Request().Method, "route", c.Path(), "request_id", RequestID(c.Request().Context()))
		return &Error{Status: http.StatusRequestTimeout, Kind: kindClientError, Title: "Request timeout"}
	case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
		// The client went away; nobody reads the answer.
		return &Error{Status: 499, Kind: kindClientError, Title: "Client closed request"}
	case store.IsUnavailable(err):
		// A driver error that reached here without the store's wrapping (a lost connection,
		// a server shutting down or still a standby during a failover): the same 503.
		s.log.WarnContext(c.Request().Context(), "database unavailable",
			"err", err, "route", c.Path(), "request_id", RequestID(c.Request().Context()))
		return ErrUnavailable
	}
	s.log.ErrorContext(c.Request().Context(), "internal error",
		"err", err, "method", c.Request().Method, "route", c.Path(), "request_id", RequestID(c.Request().Context()))
	return &Error{Status: http.StatusInternalServerError, Kind: kindInternal, Title: titleInternal}
}

// fromHTTPError maps echo's own errors (routing, body limit, parameter binding).
func (s *Server) fromHTTPError(he *echo.HTTPError, c echo.Context) *Error {
	switch he.Code {
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusUnauthorized:
		return ErrUnauthenticated
	case http.StatusForbidden:
		return ErrPermission
	case http.StatusRequestEntityTooLarge:
		return ClientError(http.StatusRequestEntityTooLarge, titleBodyTooLarge)
	case http.StatusBadRequest:
		// Binding errors are rare because the spec validator runs first; their text may quote
		// the input, so it is not sent.
		return Validation(FieldError{Path: []string{}, Message: "request could not be decoded"})
	}
	if he.Code >= 500 {
		s.log.ErrorContext(c.Request().Context(), "internal error", "err", he, "route", c.Path(), "request_id", RequestID(c.Request().Context()))
		return &Error{Status: http.StatusInternalServerError, Kind: kindInternal, Title: titleInternal}
	}
	return ClientError(he.Code, http.StatusText(he.Code))
}
