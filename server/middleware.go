package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// recoverer turns a panic into a 500 problem; the panic and its stack are logged with the
// request id by the error handler's internal-error path.
func (s *Server) recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.ErrorContext(c.Request().Context(), "panic", "panic", fmt.Sprint(r),
					"request_id", RequestID(c.Request().Context()), "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", r)
				c.Error(err)
				err = nil
			}
		}()
		return next(c)
	}
}

// requestID echoes a valid x-request-id (1–128 characters of A-Z a-z 0-9 . _ : -) or generates
// a UUID, sets it on the response before anything else can write, and puts it in the request's
// context with the client IP and user agent, for handlers, audit rows and problems.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		req := c.Request()
		meta := &requestMeta{
			ID: id, IP: s.clientIP(req), UserAgent: truncate(req.UserAgent(), 512),
			header: c.Response().Header(),
		}
		c.SetRequest(req.WithContext(withRequestMeta(req.Context(), meta)))
		return next(c)
	}
}

func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == ':' || ch == '-') {
			return false
		}
	}
	return true
}

// accessLog writes one line per request: method, path (never the query string, which may carry
// codes or tokens), route, status, duration, size, client IP and request id. Credentials and
// cookies are never logged.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		req, res := c.Request(), c.Response()
		attrs := []any{
			"method", req.Method,
			"path", req.URL.Path,
			"route", c.Path(),
			"status", res.Status,
			"duration_ms", float64(time.Since(start).Microseconds()) / 1000,
			"bytes", res.Size,
			"ip", requestMetaFrom(req.Context()).IP,
			"request_id", RequestID(req.Context()),
		}
		if d := requestMetaFrom(req.Context()).DecisionID; d != "" {
			attrs = append(attrs, "decision_id", d)
		}
		s.log.InfoContext(req.Context(), "request", attrs...)
		return nil
	}
}

// CORS: the methods and request headers a browser may use cross-origin.
const (
	corsMethods = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
	corsHeaders = "content-type, authorization, x-api-key, x-request-id, idempotency-key"
)

// cors answers credentialed cross-origin requests only for the base URL and the trusted
// origins, compared as normalised origins (so "null", an http:// variant of an https origin or
// a look-alike host never match). A disallowed origin gets no CORS headers at all. Preflights
// end here with 204.
func (s *Server) cors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req, h := c.Request(), c.Response().Header()
		origin := req.Header.Get(echo.HeaderOrigin)
		preflight := req.Method == http.MethodOptions && origin != "" && req.Header.Get(echo.HeaderAccessControlRequestMethod) != ""
		h.Add(echo.HeaderVary, echo.HeaderOrigin)
		if preflight {
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestMethod)
			h.Add(echo.HeaderVary, echo.HeaderAccessControlRequestHeaders)
		}
		allowed := origin != "" && s.trustedOrigin(origin)
		if allowed {
			h.Set(echo.HeaderAccessControlAllowOrigin, origin)
			h.Set(echo.HeaderAccessControlAllowCredentials, "true")
			if !preflight {
				h.Set(echo.HeaderAccessControlExposeHeaders, "x-request-id, retry-after, etag, location")
			}
		}
		if !preflight {
			return next(c)
		}
		if allowed {
			h.Set(echo.HeaderAccessControlAllowMethods, corsMethods)
			h.Set(echo.HeaderAccessControlAllowHeaders, corsHeaders)
			h.Set(echo.HeaderAccessControlMaxAge, "600")
		}
		return c.NoContent(http.StatusNoContent)
	}
}

// trustedOrigin reports whether origin is the base URL or a configured product origin.
func (s *Server) trustedOrigin(origin string) bool {
	n, err := NormalizeOrigin(origin)
	if err != nil {
		return false
	}
	if n == s.cfg.BaseURL {
		return true
	}
	for _, o := range s.cfg.TrustedOrigins {
		if n == o {
			return true
		}
	}
	return false
}

// securityHeaders sets the headers every response carries. Pages that need a wider
// Content-Security-Policy (the explorer) set their own.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set(echo.HeaderXContentTypeOptions, "nosniff")
		h.Set("Referrer-Policy", "strict-origin-when-cross-origin")
		h.Set(echo.HeaderXFrameOptions, "DENY")
		h.Set(echo.HeaderContentSecurityPolicy, "default-src 'none'; frame-ancestors 'none'")
		if s.cfg.Secure() {
			h.Set(echo.HeaderStrictTransportSecurity, "max-age=31536000; includeSubDomains")
		}
		return next(c)
	}
}

// bodyLimit refuses request bodies over cfg.BodyLimit with 413, whether announced by
// Content-Length or discovered while reading.
func (s *Server) bodyLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > s.cfg.BodyLimit {
			return ClientError(http.StatusRequestEntityTooLarge, "Request body too large")
		}
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = http.MaxBytesReader(c.Response(), req.Body, s.cfg.BodyLimit)
		}
		return next(c)
	}
}

// clientIP is the peer address, or the right-most untrusted X-Forwarded-For entry when the peer
// is a trusted proxy.
func (s *Server) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !s.trustedProxy(peer.Unmap()) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values(echo.HeaderXForwardedFor), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !s.trustedProxy(a.Unmap()) {
			return a.Unmap().String()
		}
	}
	return peer.Unmap().String()
}

func (s *Server) trustedProxy(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
