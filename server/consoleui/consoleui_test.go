package consoleui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/labstack/echo/v4"
)

// serve mounts u as the server does and answers one GET.
func serve(u *UI, path string) *httptest.ResponseRecorder {
	e := echo.New()
	e.GET("/", u.Root)
	e.GET("/docs", u.Docs)
	e.GET("/console", u.Slash)
	e.GET(Prefix+"*", u.Serve)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

const shell = `<!doctype html><html lang="en"><head><script type="module" src="/console/assets/index-AbC123.js"></script></head><body><div id="root"></div></body></html>`

// built is a console build as vite writes it.
var built = fstest.MapFS{
	"index.html":              {Data: []byte(shell)},
	"assets/index-AbC123.js":  {Data: []byte("console.log(1)")},
	"assets/index-DeF456.css": {Data: []byte("body{}")},
	"robots.txt":              {Data: []byte("User-agent: *")},
}

func TestServeBuilt(t *testing.T) {
	u := New(built, "/docs/api-reference")
	if !u.Available() {
		t.Fatal("a build with index.html is not Available")
	}
	// Hashed assets: a year, immutable, the right type, the CSP.
	for path, ctype := range map[string]string{
		"/console/assets/index-AbC123.js":  "text/javascript; charset=utf-8",
		"/console/assets/index-DeF456.css": "text/css; charset=utf-8",
	} {
		rec := serve(u, path)
		if rec.Code != 200 || rec.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" ||
			rec.Header().Get("Content-Type") != ctype || rec.Header().Get("Content-Security-Policy") != ContentSecurityPolicy {
			t.Errorf("%s: %d %q %q", path, rec.Code, rec.Header().Get("Cache-Control"), rec.Header().Get("Content-Type"))
		}
	}
	// Another file of the build: revalidated.
	if rec := serve(u, "/console/robots.txt"); rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-cache" || rec.Body.String() != "User-agent: *" {
		t.Errorf("robots.txt: %d %q %q", rec.Code, rec.Header().Get("Cache-Control"), rec.Body.String())
	}
	// Every other path under /console/ is the shell, never cached.
	for _, path := range []string{"/console/", "/console/index.html", "/console/orgs/o1/projects/p1/config", "/console/assets", "/console/../console/x"} {
		rec := serve(u, path)
		if rec.Code != 200 || rec.Body.String() != shell || rec.Header().Get("Cache-Control") != "no-store" ||
			rec.Header().Get("Content-Security-Policy") != ContentSecurityPolicy || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %q %q, want the shell", path, rec.Code, rec.Header().Get("Cache-Control"), rec.Body.String())
		}
	}
	// A missing asset is a 404, never the shell (a stale page must not run HTML as script).
	if rec := serve(u, "/console/assets/index-Old000.js"); rec.Code != 404 {
		t.Errorf("missing asset: %d %q", rec.Code, rec.Body.String())
	}
	// Redirects.
	for path, want := range map[string]string{"/": "/console/", "/docs": "/docs/api-reference", "/console": "/console/"} {
		if rec := serve(u, path); rec.Code/100 != 3 || rec.Header().Get("Location") != want {
			t.Errorf("%s: %d to %q, want %q", path, rec.Code, rec.Header().Get("Location"), want)
		}
	}
}

func TestServeUnbuilt(t *testing.T) {
	u := New(fstest.MapFS{"README.md": {Data: []byte("placeholder")}}, "/docs/api-reference")
	if u.Available() {
		t.Fatal("a build without index.html is Available")
	}
	for _, path := range []string{"/console/", "/console/orgs/o1/projects", "/console/README.md"} {
		rec := serve(u, path)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "Run <code>make build</code>") ||
			rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d %q", path, rec.Code, rec.Body.String())
		}
	}
}

// TestCSP: the policy runs no inline script and reaches no other origin.
func TestCSP(t *testing.T) {
	for _, want := range []string{"default-src 'self'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe-eval") || strings.Contains(strings.SplitN(strings.SplitN(ContentSecurityPolicy, "script-src", 2)[1], ";", 2)[0], "unsafe-inline") {
		t.Error("CSP allows inline or eval'd script")
	}
}
