package docsui

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/labstack/echo/v4"
)

const specURL = "/api/v1/openapi.json"

var fakeBundle = []byte("window.Scalar = {createApiReference: function () {}};\n")

// builtUI is the explorer as built by `make assets`, with a stand-in bundle.
func builtUI(t *testing.T) *UI {
	t.Helper()
	u := newUI(specURL, fstest.MapFS{"scalar.js": {Data: fakeBundle}, "README.md": {Data: []byte("x")}})
	if !u.Available() {
		t.Fatal("Available() = false with scalar.js present")
	}
	return u
}

// unbuiltUI is the explorer of a build without the bundle.
func unbuiltUI(t *testing.T) *UI {
	t.Helper()
	u := newUI(specURL, fstest.MapFS{"README.md": {Data: []byte("x")}})
	if u.Available() {
		t.Fatal("Available() = true without scalar.js")
	}
	return u
}

// serve routes req through echo as the lead mounts the package.
func serve(u *UI, req *http.Request) *httptest.ResponseRecorder {
	e := echo.New()
	e.GET("/api/v1/docs", u.Index)
	e.GET("/docs/api-reference", u.Index)
	e.GET("/docs/assets/:file", u.Asset)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func get(u *UI, target string) *httptest.ResponseRecorder {
	return serve(u, httptest.NewRequest(http.MethodGet, target, nil))
}

var scriptSrc = regexp.MustCompile(`<script src="([^"]+)"></script>`)

func TestIndexServesExplorerWithCSP(t *testing.T) {
	u := builtUI(t)
	for _, path := range []string{"/api/v1/docs", "/docs/api-reference"} {
		rec := get(u, path)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d, want 200", path, rec.Code)
		}
		h := rec.Header()
		if got := h.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("GET %s: CSP %q, want %q", path, got, ContentSecurityPolicy)
		}
		if got := h.Get("Content-Type"); !strings.HasPrefix(got, "text/html") {
			t.Errorf("GET %s: Content-Type %q", path, got)
		}
		if got := h.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache", path, got)
		}
		body := rec.Body.String()
		if !strings.Contains(body, `<div id="app" data-openapi-url="/api/v1/openapi.json">`) {
			t.Errorf("GET %s: page lacks the spec URL:\n%s", path, body)
		}
		// The bundle auto-mounts with its default (online) configuration
		// on any of these.
		for _, trigger := range []string{"data-spec-url", "data-spec=", `id="api-reference"`} {
			if strings.Contains(body, trigger) {
				t.Errorf("GET %s: page has %s, which makes Scalar mount itself with defaults", path, trigger)
			}
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "style=") {
			t.Errorf("GET %s: page has inline script or style, which the CSP forbids:\n%s", path, body)
		}
		var srcs []string
		for _, m := range scriptSrc.FindAllStringSubmatch(body, -1) {
			srcs = append(srcs, m[1])
		}
		want := []string{
			"/docs/assets/scalar.js?v=" + u.assets["scalar.js"].version,
			"/docs/assets/init.js?v=" + u.assets["init.js"].version,
		}
		if strings.Join(srcs, " ") != strings.Join(want, " ") {
			t.Errorf("GET %s: scripts %q, want %q", path, srcs, want)
		}
	}
}

func TestCSPIsStrict(t *testing.T) {
	for _, directive := range []string{
		"default-src 'self'", "script-src 'self';", "connect-src 'self'",
		"frame-ancestors 'none'", "object-src 'none'",
	} {
		if !strings.Contains(ContentSecurityPolicy, directive) {
			t.Errorf("CSP lacks %q: %s", directive, ContentSecurityPolicy)
		}
	}
	for _, loose := range []string{"unsafe-eval", "http:", "https:", "*"} {
		if strings.Contains(ContentSecurityPolicy, loose) {
			t.Errorf("CSP allows %q: %s", loose, ContentSecurityPolicy)
		}
	}
}

func TestAssetsFollowPageURLs(t *testing.T) {
	u := builtUI(t)
	page := get(u, "/docs/api-reference").Body.String()
	bodies := map[string][]byte{"scalar.js": fakeBundle, "init.js": initJS}
	for _, m := range scriptSrc.FindAllStringSubmatch(page, -1) {
		url := m[1]
		rec := get(u, url)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d", url, rec.Code)
		}
		h := rec.Header()
		if got := h.Get("Content-Type"); got != "text/javascript; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", url, got)
		}
		if got := h.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("GET %s: Cache-Control %q, want immutable for the hashed URL", url, got)
		}
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", url, got)
		}
		name := strings.TrimPrefix(url[:strings.Index(url, "?")], "/docs/assets/")
		if got := rec.Body.Bytes(); string(got) != string(bodies[name]) {
			t.Errorf("GET %s: body is not %s", url, name)
		}
		if etag := h.Get("ETag"); etag != `"`+u.assets[name].version+`"` {
			t.Errorf("GET %s: ETag %q", url, etag)
		}
	}
}

func TestAssetWithoutCurrentHashRevalidates(t *testing.T) {
	u := builtUI(t)
	for _, url := range []string{"/docs/assets/scalar.js", "/docs/assets/scalar.js?v=0123456789abcdef"} {
		rec := get(u, url)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status %d", url, rec.Code)
		}
		if got := rec.Header().Get("Cache-Control"); got != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache", url, got)
		}
		etag := rec.Header().Get("ETag")
		req := httptest.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("If-None-Match", etag)
		if rec := serve(u, req); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
			t.Errorf("GET %s with If-None-Match %s: status %d, %d bytes; want 304, empty", url, etag, rec.Code, rec.Body.Len())
		}
	}
}

func TestUnknownAssetIsNotFound(t *testing.T) {
	u := builtUI(t)
	for _, name := range []string{"README.md", "standalone.js", "..%2Fdocsui.go", "scalar.js.map", "INIT.JS"} {
		if rec := get(u, "/docs/assets/"+name); rec.Code != http.StatusNotFound {
			t.Errorf("GET /docs/assets/%s: status %d, want 404", name, rec.Code)
		}
	}
	// The handler reports the miss as echo.ErrNotFound, leaving the body to
	// the server's error handler.
	e := echo.New()
	c := e.NewContext(httptest.NewRequest(http.MethodGet, "/docs/assets/x.js", nil), httptest.NewRecorder())
	c.SetParamNames("file")
	c.SetParamValues("x.js")
	if err := u.Asset(c); !errors.Is(err, echo.ErrNotFound) {
		t.Errorf("Asset(x.js) = %v, want echo.ErrNotFound", err)
	}
}

func TestPlaceholderWithoutBundle(t *testing.T) {
	u := unbuiltUI(t)
	for _, path := range []string{"/api/v1/docs", "/docs/api-reference"} {
		rec := get(u, path)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("GET %s: status %d, want 503", path, rec.Code)
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("GET %s: CSP %q", path, got)
		}
		body := rec.Body.String()
		if !strings.Contains(body, "The API explorer bundle is not built. Run <code>make assets</code> (npm ci + copy) and rebuild.") {
			t.Errorf("GET %s: placeholder lacks build instructions:\n%s", path, body)
		}
		if strings.Contains(body, "<script") {
			t.Errorf("GET %s: placeholder references scripts:\n%s", path, body)
		}
	}
	if rec := get(u, "/docs/assets/scalar.js"); rec.Code != http.StatusNotFound {
		t.Errorf("GET scalar.js without bundle: status %d, want 404", rec.Code)
	}
	if rec := get(u, "/docs/assets/init.js"); rec.Code != http.StatusOK {
		t.Errorf("GET init.js without bundle: status %d, want 200", rec.Code)
	}
}

func TestEmptyBundleCountsAsMissing(t *testing.T) {
	u := newUI(specURL, fstest.MapFS{"scalar.js": {Data: nil}})
	if u.Available() {
		t.Error("Available() = true for an empty scalar.js")
	}
}

func TestSpecURLIsEscaped(t *testing.T) {
	u := newUI(`/spec.json?a=1&b="><script>x</script>`, fstest.MapFS{"scalar.js": {Data: fakeBundle}})
	body := get(u, "/docs/api-reference").Body.String()
	if strings.Contains(body, "<script>x") {
		t.Errorf("spec URL not escaped:\n%s", body)
	}
}

// TestNew checks the embedded state, whichever it is in this build.
func TestNew(t *testing.T) {
	u := New(specURL)
	want := http.StatusServiceUnavailable
	if u.Available() {
		want = http.StatusOK
	}
	if rec := get(u, "/docs/api-reference"); rec.Code != want {
		t.Errorf("status %d, want %d (Available() = %v)", rec.Code, want, u.Available())
	}
	if !strings.Contains(string(initJS), "withDefaultFonts: false") || !strings.Contains(string(initJS), "telemetry: false") {
		t.Error("init.js must turn off default fonts and telemetry")
	}
}
