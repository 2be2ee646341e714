package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestProblemPagesAccessible opens the page behind each problem type URI
// ({base_url}/problems/<kind>) in headless Chromium at 390 px and 1280 px: the page shows its
// heading, axe-core finds no serious or critical violation, nothing scrolls sideways at 390 px,
// and the page's CSP (a nonce for its one stylesheet, nothing else) reports no violation.
func TestProblemPagesAccessible(t *testing.T) {
	browser := findBrowser(t)
	axe := axeSource(t)
	base := startDocsServer(t)
	d := pageDriver{t: t, ctx: newOfflineBrowser(t, browser, 2*time.Minute), shots: "problem-"}
	if _, err := chromedp.Call(d.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder}); err != nil {
		t.Fatalf("install CSP recorder: %v", err)
	}
	for kind, heading := range map[string]string{
		"validation":          "Validation failed",
		"http-401":            "Authentication required",
		"http-403":            "Permission denied",
		"http-404":            "Not found",
		"conflict":            "Conflict",
		"http-4xx":            "Client error",
		"two-factor-required": "Two-factor authentication required",
		"http-502":            "Bad gateway",
		"unavailable":         "Service unavailable",
		"internal":            "Internal server error",
	} {
		d.do(kind, chromedp.Navigate(base+"/problems/"+kind))
		d.waitHeading(heading)
		for _, width := range []int64{390, 1280} {
			d.do(kind+": viewport", chromedp.EmulateViewport(width, 844))
			if _, err := chromedp.Run(d.ctx, chromedp.Evaluate[bool](axe+";\ntrue")); err != nil {
				t.Fatalf("%s: inject axe-core: %v", kind, err)
			}
			violations, err := chromedp.Run(d.ctx, chromedp.Evaluate[[]string](axeSerious, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatalf("%s at %d px: axe: %v", kind, width, err)
			}
			for _, v := range violations {
				t.Errorf("%s at %d px: %s", kind, width, v)
			}
			if width == 390 {
				if sw, err := chromedp.Run(d.ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || sw > 390 {
					t.Errorf("%s: scrollWidth %d at 390 px (%v)", kind, sw, err)
				}
			}
		}
		csp, err := chromedp.Run(d.ctx, chromedp.Evaluate[[]cspViolation](`window.__cspViolations || []`))
		if err != nil || len(csp) > 0 {
			t.Errorf("%s: CSP violations %+v (%v)", kind, csp, err)
		}
	}
}
