// Package consoleui serves Gatehouse's admin console: the single-page app built from console/
// (React, Vite) and embedded in the binary (see embed.go), at /console/.
//
// Routes, mounted by the caller (none is an API operation):
//
//	GET /                  -> Root: 302 to /console/
//	GET /docs              -> Docs: 302 to the API explorer
//	GET /console           -> 301 to /console/
//	GET /console/*         -> Serve
//
// Serve answers a file of the build under /console/assets/ (hashed names) with a year of
// immutable caching, any other existing file of the build with no-cache, and every other path
// under /console/ with the app shell (index.html), no-store, so that the app's own router
// handles deep links and a deploy is never hidden behind a cached shell. A missing file under
// /console/assets/ is a 404, never the shell. Everything is served with a strict
// Content-Security-Policy: scripts from this origin only (no inline script, no eval), requests
// to this origin only, nothing framed.
package consoleui

import (
	"bytes"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// ContentSecurityPolicy is sent with the shell and every file. Styles allow 'unsafe-inline'
// because the component library (Mantine) writes its CSS variables in a <style> element and
// positions popovers with style attributes; scripts never run inline.
const ContentSecurityPolicy = "default-src 'self'; " +
	"script-src 'self'; " +
	"style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; " +
	"font-src 'self' data:; " +
	"connect-src 'self'; " +
	"object-src 'none'; " +
	"base-uri 'none'; " +
	"form-action 'self'; " +
	"frame-ancestors 'none'"

const (
	// Prefix is where the console is mounted.
	Prefix = "/console/"
	// assetDir holds Vite's content-hashed output.
	assetDir = "assets/"

	immutableCache = "public, max-age=31536000, immutable"
	revalidate     = "no-cache"
	noStore        = "no-store"
)

// UI serves the console. It is immutable after New and safe for concurrent use.
type UI struct {
	dist      fs.FS
	available bool
	shell     []byte
	status    int
	docsURL   string
}

// New returns the console served from dist (Dist() in production; tests pass their own).
// docsURL is where GET /docs redirects (the API explorer).
func New(dist fs.FS, docsURL string) *UI {
	u := &UI{dist: dist, docsURL: docsURL, status: http.StatusOK}
	shell, err := fs.ReadFile(dist, "index.html")
	u.available = err == nil && len(shell) > 0
	if u.available {
		u.shell = shell
		return u
	}
	var buf bytes.Buffer
	if err := placeholder.Execute(&buf, nil); err != nil {
		panic("consoleui: render placeholder: " + err.Error()) // cannot happen: fixed template
	}
	u.shell, u.status = buf.Bytes(), http.StatusServiceUnavailable
	return u
}

// Available reports whether a built console was embedded.
func (u *UI) Available() bool { return u.available }

// Root sends the browser from the base URL to the console.
func (u *UI) Root(c echo.Context) error {
	return c.Redirect(http.StatusFound, Prefix)
}

// Docs sends the browser from /docs to the API explorer.
func (u *UI) Docs(c echo.Context) error {
	return c.Redirect(http.StatusFound, u.docsURL)
}

// Slash adds the trailing slash to /console.
func (u *UI) Slash(c echo.Context) error {
	return c.Redirect(http.StatusMovedPermanently, Prefix)
}

// Serve answers GET /console/*: a file of the build, or the shell (see the package comment).
func (u *UI) Serve(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	name := strings.TrimPrefix(c.Request().URL.Path, Prefix)
	clean := path.Clean("/" + name)[1:]
	if u.available && clean != "" && clean != "index.html" && clean == name {
		if body, err := fs.ReadFile(u.dist, clean); err == nil {
			if strings.HasPrefix(clean, assetDir) {
				h.Set(echo.HeaderCacheControl, immutableCache)
			} else {
				h.Set(echo.HeaderCacheControl, revalidate)
			}
			if ct := mime.TypeByExtension(path.Ext(clean)); ct != "" {
				h.Set(echo.HeaderContentType, ct)
			}
			http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(body))
			return nil
		}
	}
	if strings.HasPrefix(clean, assetDir) {
		return echo.ErrNotFound // a stale or mistyped asset: never the shell
	}
	h.Set(echo.HeaderCacheControl, noStore)
	return c.HTMLBlob(u.status, u.shell)
}

// placeholder is served when the console was not built into this binary.
var placeholder = template.Must(template.New("placeholder").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gatehouse console (not built)</title>
<link rel="icon" href="data:,">
</head>
<body>
<main>
<h1>Gatehouse console</h1>
<p>The admin console is not built into this binary. Run <code>make build</code> (it runs
<code>npm ci</code> and <code>vite build</code> in <code>console/</code> and embeds the output),
or <code>make console</code> and then <code>go build</code>, without <code>-tags no_ui</code>.</p>
<p>The API explorer is at <a href="/docs/api-reference">/docs/api-reference</a>.</p>
</main>
</body>
</html>
`))
