package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// The middleware chain, outermost first: recover → request id → access log → CORS → security
// headers → body limit → (route) → match the spec operation → authenticate → validate →
// authorize → handler. Everything but the request id, which validates what it echoes, and the
// Gatehouse-specific stages is echo's own middleware, configured here.

// recoverer turns a panic into a 500 problem; the panic and its stack are logged with the
// request id, and the error handler writes the problem.
func (s *Server) recoverer() echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableStackAll: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.ErrorContext(c.Request().Context(), "panic", "panic", err.Error(),
				"request_id", RequestID(c.Request().Context()), "stack", string(stack))
			return fmt.Errorf("panic: %w", err)
		},
	})
}

// requestID echoes a valid x-request-id (1–128 characters of A-Z a-z 0-9 . _ : -) or generates
// a UUID, sets it on the response before anything else can write, and puts it in the request's
// context with the client IP and user agent, for handlers, audit rows and problems. The context
// ends after RequestTimeout.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		req := c.Request()
		meta := &requestMeta{
			ID: id, IP: c.RealIP(), UserAgent: recordedText(req.UserAgent(), 512), Accept: req.Header.Get(echo.HeaderAccept),
			header: c.Response().Header(), reqHeader: req.Header,
		}
		ctx, cancel := context.WithTimeout(withRequestMeta(req.Context(), meta), RequestTimeout)
		defer cancel()
		c.SetRequest(req.WithContext(ctx))
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
// codes or tokens, and the route instead of a path that carries a token), route, status, duration, size, client IP and request id. Credentials and
// cookies are never logged. Errors are handed to the error handler first, so the line has the
// status the client got. The same values feed the request metrics (metrics.go), labelled by
// the spec operation rather than the path.
func (s *Server) accessLog() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		HandleError: true, LogStatus: true, LogLatency: true, LogResponseSize: true,
		LogMethod: true, LogURIPath: true, LogRoutePath: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			ctx := c.Request().Context()
			path := v.URIPath
			if strings.Contains(v.RoutePath, ":token") {
				// A secret in the path (a reset link's token) is logged as its route.
				path = v.RoutePath
			}
			attrs := []slog.Attr{
				slog.String("method", v.Method),
				slog.String("path", path),
				slog.String("route", v.RoutePath),
				slog.Int("status", v.Status),
				slog.Float64("duration_ms", float64(v.Latency.Microseconds())/1000),
				slog.Int64("bytes", v.ResponseSize),
				slog.String("ip", requestMetaFrom(ctx).IP),
				slog.String("request_id", RequestID(ctx)),
			}
			if d := requestMetaFrom(ctx).DecisionID; d != "" {
				attrs = append(attrs, slog.String("decision_id", d))
			}
			s.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
			// The operation of the route echo matched, even when a stage before match (CORS
			// preflight, body limit) answered.
			operation := operationUnmatched
			if op := s.operations[routeKey(c.Request().Method, c.Path())]; op != nil {
				operation = op.id
			}
			s.metrics.observeRequest(operation, v.Method, v.Status, v.Latency)
			return nil
		},
	})
}

// cors answers credentialed cross-origin requests only for the base URL and the trusted
// origins, compared as normalised origins (so "null", an http:// variant of an https origin or
// a look-alike host never match). A disallowed origin gets no CORS headers at all. Preflights
// end here with 204.
func (s *Server) cors() echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOriginFunc:  func(origin string) (bool, error) { return s.trustedOrigin(origin), nil },
		AllowCredentials: true,
		AllowMethods:     []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"},
		AllowHeaders:     []string{"content-type", "authorization", "x-api-key", "x-request-id", "idempotency-key"},
		ExposeHeaders:    []string{"x-request-id", "retry-after", "etag", "location", "x-next-cursor"},
		MaxAge:           600,
	})
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
func (s *Server) securityHeaders() echo.MiddlewareFunc {
	secure := middleware.SecureWithConfig(middleware.SecureConfig{
		ContentTypeNosniff:    "nosniff",
		XFrameOptions:         "DENY",
		ContentSecurityPolicy: "default-src 'none'; frame-ancestors 'none'",
		ReferrerPolicy:        "strict-origin-when-cross-origin",
	})
	if !s.cfg.Secure() {
		return secure
	}
	// echo sends HSTS only to requests it sees arriving over TLS; Gatehouse usually sits behind
	// a TLS-terminating proxy, so an https base URL decides.
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		h := secure(next)
		return func(c echo.Context) error {
			c.Response().Header().Set(echo.HeaderStrictTransportSecurity, "max-age=31536000; includeSubDomains")
			return h(c)
		}
	}
}

// bodyLimit refuses request bodies over cfg.BodyLimit with 413, whether announced by
// Content-Length or discovered while reading (chunked bodies).
func (s *Server) bodyLimit() echo.MiddlewareFunc {
	return middleware.BodyLimit(strconv.FormatInt(s.cfg.BodyLimit, 10) + "B")
}

// ipExtractor finds the client IP: the peer address, or the right-most untrusted
// X-Forwarded-For entry when the peer is one of the trusted proxies (and the left-most entry
// when every hop is trusted). Only the configured ranges are trusted: not loopback, link-local
// or private networks by default.
func ipExtractor(cfg Config) echo.IPExtractor {
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range cfg.TrustedProxies {
		addr := p.Addr()
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(p.Bits(), addr.BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// recordedText is s as a recorded header (the User-Agent on sessions and audit rows): text both
// databases store (store.ValidText), each run of bytes that is not UTF-8 and each NUL replaced by
// U+FFFD, cut to at most n bytes on a character boundary. The client chose none of it as a
// field, so it is cleaned rather than refused.
func recordedText(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
