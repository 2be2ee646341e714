package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
)

type ctxKey int

const requestMetaKey ctxKey = iota

// requestMeta is what every handler may need about the request beyond its typed input.
type requestMeta struct {
	ID        string
	IP        string
	UserAgent string
	// Accept is the request's Accept header (browser form posts get redirects, not JSON).
	Accept string
	// DecisionID is the id of the /authorize decision the request made, for the access log.
	DecisionID string
	// header is the response's header map: strict handlers set cookies through it.
	header http.Header
	// reqHeader is the request's header map: strict handlers read cookies through it
	// (requestOf).
	reqHeader http.Header
}

func withRequestMeta(ctx context.Context, m *requestMeta) context.Context {
	return context.WithValue(ctx, requestMetaKey, m)
}

func requestMetaFrom(ctx context.Context) *requestMeta {
	if m, ok := ctx.Value(requestMetaKey).(*requestMeta); ok {
		return m
	}
	return &requestMeta{header: http.Header{}}
}

// requestOf returns a request carrying the headers of the request ctx belongs to (none
// outside a request), with ctx, for the readers of cookies that take an *http.Request.
func requestOf(ctx context.Context) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if h := requestMetaFrom(ctx).reqHeader; h != nil {
		r.Header = h
	}
	return r
}

// RequestID returns the id of the request ctx belongs to, or "" outside a request.
func RequestID(ctx context.Context) string { return requestMetaFrom(ctx).ID }

// RequestInfo returns the id, client IP and user agent of the request ctx belongs to ("" for
// each outside a request): what audit entries record (oauth.ProviderConfig.RequestInfo).
func RequestInfo(ctx context.Context) (requestID, ip, userAgent string) {
	m := requestMetaFrom(ctx)
	return m.ID, m.IP, m.UserAgent
}

// setCookie adds a Set-Cookie header to the response of the request ctx belongs to. Strict
// handlers call it before returning their response object.
func setCookie(ctx context.Context, c *http.Cookie) {
	if v := c.String(); v != "" {
		requestMetaFrom(ctx).header.Add("Set-Cookie", v)
	}
}

// setResponseHeader sets a header on the response of the request ctx belongs to.
func setResponseHeader(ctx context.Context, key, value string) {
	requestMetaFrom(ctx).header.Set(key, value)
}

// jsonEncode writes v as JSON without escaping <, > and &, which JSON bodies do not need.
func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
