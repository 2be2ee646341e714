package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/server/docsui"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// requireBrowserEnv makes a missing browser (or explorer bundle) fail the
// browser tests instead of skipping them; CI sets it.
const requireBrowserEnv = "GATEHOUSE_REQUIRE_BROWSER"

// browserNames are the executables tried, in order, for the browser tests.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findBrowser returns the path of a Chromium-family browser. Without one it
// fails the test when GATEHOUSE_REQUIRE_BROWSER=1 and skips it otherwise.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range browserNames {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	skipOrFail(t, "no browser found (tried "+strings.Join(browserNames, ", ")+
		"); install one with: apt-get install -y chromium")
	return ""
}

// skipOrFail skips the test, or fails it when GATEHOUSE_REQUIRE_BROWSER=1.
func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv(requireBrowserEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, requireBrowserEnv)
	}
	t.Skipf("%s; set %s=1 to make this a failure", msg, requireBrowserEnv)
}

// newOfflineBrowser starts a headless browser that can resolve no host name
// and reach nothing but 127.0.0.1, with a fresh profile. The returned context
// is bound to it and ends with the test or after timeout.
func newOfflineBrowser(t *testing.T, execPath string, timeout time.Duration) context.Context {
	t.Helper()
	return newOfflineBrowserResolving(t, execPath, timeout, "127.0.0.1")
}

// newOfflineBrowserResolving is newOfflineBrowser that resolves exactly the hosts in
// resolvable (127.0.0.1, and localhost for WebAuthn, which takes no IP address as a relying
// party id).
func newOfflineBrowserResolving(t *testing.T, execPath string, timeout time.Duration, resolvable ...string) context.Context {
	t.Helper()
	rules := "MAP * ~NOTFOUND"
	for _, h := range resolvable {
		rules += " , EXCLUDE " + h
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("host-resolver-rules", rules),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	ctx, cancelBrowser := chromedp.NewContext(ctx)
	// Cleanups run last-in first-out: the browser exits before t.TempDir
	// removes its profile.
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancel()
	})
	return ctx
}

const healthSummary = "Check service health"

// startDocsServer serves the docs routes, a stand-in OpenAPI document and its
// one operation (GET /api/v1/health) on 127.0.0.1, and returns the base URL.
//
// startDocsServer runs the real Gatehouse app over a fresh SQLite store on a 127.0.0.1 port
// and returns its base URL.
func startDocsServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil) // listens on 127.0.0.1
	base := "http://" + srv.Listener.Addr().String()
	app, err := newServer(server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32)},
		storetest.Backends(t)[0].Open(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = app.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// cspRecorder runs before the page's own scripts (DevTools injects it, so the
// page CSP does not apply) and records every CSP violation.
const cspRecorder = `window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolations.push({directive: e.effectiveDirective, blocked: e.blockedURI, source: e.sourceFile + ':' + e.lineNumber});
});`

// cspViolation is one securitypolicyviolation event, as cspRecorder keeps it.
type cspViolation struct {
	Directive string `json:"directive"`
	Blocked   string `json:"blocked"`
	Source    string `json:"source"`
}

// tolerated reports whether a violation is expected and harmless: the bundled
// zod probes for eval with Function("") inside try/catch and falls back to
// its interpreter, so the page needs no 'unsafe-eval'.
func (v cspViolation) tolerated() bool {
	return v.Directive == "script-src" && v.Blocked == "eval"
}

// visibleWith returns a JavaScript expression for the first visible element
// of the given CSS selector whose own text contains text, or null. chromedp
// waits on it with JSPath; NodeVisible alone would wait for every match,
// while the explorer keeps hidden copies of some labels.
func visibleWith(selector, text string) string {
	return fmt.Sprintf(`(() => {
  for (const el of document.querySelectorAll(%[1]q)) {
    const own = [...el.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.data.includes(%[2]q));
    if ((own || (el.tagName === 'BUTTON' && el.textContent.includes(%[2]q))) && el.checkVisibility()) return el;
  }
  return null;
})()`, selector, text)
}

// TestDocsExplorerRendersOffline loads the API explorer in a browser that can
// reach only 127.0.0.1 and checks that it renders the document's operations,
// that its "Test Request" client calls the API directly (no proxy), that every
// request stays on the server, and that the page CSP blocks nothing the
// explorer needs.
func TestDocsExplorerRendersOffline(t *testing.T) {
	browser := findBrowser(t)
	if !docsui.New("").Available() {
		skipOrFail(t, "the API explorer bundle is not embedded; run `make assets` first")
	}
	base := startDocsServer(t)
	ctx := newOfflineBrowser(t, browser, 60*time.Second)

	var (
		mu   sync.Mutex
		urls []string
	)
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start browser %s: %v", browser, err)
	}
	requests := func() string {
		mu.Lock()
		defer mu.Unlock()
		return "requests:\n  " + strings.Join(urls, "\n  ")
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatalf("install CSP recorder: %v", err)
	}

	// Leave time after a timed-out step for the screenshot and the report.
	steps, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	err := chromedp.Do(steps,
		chromedp.Navigate(base+"/docs/api-reference"),
		chromedp.WaitVisible(chromedp.JSPath(visibleWith("*", healthSummary))),
	)
	screenshot(ctx, t, "docs-explorer.png")
	if err != nil {
		t.Fatalf("explorer did not show %q: %v\n%s", healthSummary, err, requests())
	}

	// Open the operation from the sidebar, as a person would: Scalar renders the operations
	// below a long introduction only when they are scrolled to.
	err = chromedp.Do(steps,
		chromedp.Click(chromedp.JSPath(visibleWith("*", healthSummary)), chromedp.NodeVisible),
		chromedp.Click(chromedp.JSPath(visibleWith("button", "Test Request")), chromedp.NodeVisible),
		chromedp.Click(chromedp.JSPath(visibleWith("button", "Send get request")), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.JSPath(visibleWith("*", "200 OK"))),
		chromedp.Sleep(500*time.Millisecond), // let late requests show up
	)
	screenshot(ctx, t, "docs-test-request.png")
	if err != nil {
		t.Fatalf("Test Request of %s did not show 200 OK: %v\n%s", healthSummary, err, requests())
	}

	mu.Lock()
	seen := slices.Clone(urls)
	mu.Unlock()
	var offsite []string
	specLoaded, apiCalled := false, false
	for _, raw := range seen {
		u, perr := url.Parse(raw)
		switch {
		case perr != nil:
			offsite = append(offsite, raw)
		case u.Scheme == "data" || u.Scheme == "blob":
		case u.Hostname() != "127.0.0.1":
			offsite = append(offsite, raw)
		case u.Path == "/api/v1/openapi.json":
			specLoaded = true
		case u.Path == "/api/v1/health":
			apiCalled = true
		}
	}
	if len(offsite) > 0 {
		t.Errorf("requests left 127.0.0.1: %q\n%s", offsite, requests())
	}
	if !specLoaded || !apiCalled {
		t.Errorf("the explorer did not request both /api/v1/openapi.json and /api/v1/health\n%s", requests())
	}

	violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]cspViolation]("window.__cspViolations"))
	if err != nil {
		t.Fatalf("read CSP violations: %v", err)
	}
	for _, v := range violations {
		if v.tolerated() {
			t.Logf("expected CSP violation: %s blocked %q (%s)", v.Directive, v.Blocked, v.Source)
			continue
		}
		t.Errorf("CSP violation: %s blocked %q (%s)", v.Directive, v.Blocked, v.Source)
	}
}

// screenshot saves the page to the test's artifact directory (kept with
// go test -artifacts -outputdir DIR) and logs the path. It only logs failures.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		path := filepath.Join(t.ArtifactDir(), name)
		if err = os.WriteFile(path, png, 0o644); err == nil {
			t.Logf("screenshot: %s", path)
			return
		}
	}
	t.Logf("screenshot %s: %v", name, err)
}
