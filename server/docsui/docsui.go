// Package docsui serves Gatehouse's offline API explorer: the Scalar API
// reference, rendered in the browser from the service's own OpenAPI document.
//
// Everything the page needs is embedded in the binary and served from the same
// origin: the Scalar bundle (dist/scalar.js, copied from npm by `make assets`,
// never committed) and a small committed bootstrap (init.js). A strict
// Content-Security-Policy keeps the page from loading or sending anything
// elsewhere.
//
// The bundle is optional at build time. Without it the package still compiles
// and Index serves a page explaining how to build it (see Index).
//
// Routes, mounted by the caller:
//
//	GET /api/v1/docs         -> Index
//	GET /docs/api-reference  -> Index
//	GET /docs/assets/:file   -> Asset
package docsui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// ContentSecurityPolicy is the policy sent with every page Index serves.
//
// Scripts come only from this origin (the bundle and init.js; no inline
// script, no eval). Styles also allow 'unsafe-inline' because Scalar injects
// <style> elements at runtime, several without a nonce (toast styles, theme
// and custom CSS). Images may be data: URIs (inline icons) or blob: URLs (the
// API client's previews of image responses, built locally). Requests go only
// to this origin, so the explorer's "Test Request" works for the API served
// here and nothing else. The page cannot be framed.
const ContentSecurityPolicy = "default-src 'self'; " +
	"script-src 'self'; " +
	"style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; " +
	"font-src 'self' data:; " +
	"connect-src 'self'; " +
	"object-src 'none'; " +
	"base-uri 'none'; " +
	"form-action 'self'; " +
	"frame-ancestors 'none'"

const (
	// assetPrefix is where Asset is mounted; pages reference assets by
	// absolute path because Index is served at more than one URL.
	assetPrefix = "/docs/assets/"
	scalarFile  = "scalar.js"
	initFile    = "init.js"

	// immutableCache is used only when the request names the content hash
	// of the asset it gets (?v=...), so a new build never hits a stale copy.
	immutableCache = "public, max-age=31536000, immutable"
	// revalidateCache is used for pages and for asset URLs without the
	// current hash: the browser may store them but must revalidate (ETag).
	revalidateCache = "no-cache"
)

//go:embed all:dist
var distFS embed.FS

//go:embed init.js
var initJS []byte

// UI serves the API explorer page and its static assets. It is immutable
// after New and safe for concurrent use.
type UI struct {
	available bool
	status    int    // status code of the page Index serves
	page      []byte // the rendered page
	assets    map[string]asset
}

// asset is one embedded script and its content version.
type asset struct {
	body    []byte
	version string // hex prefix of the body's SHA-256
}

func newAsset(body []byte) asset {
	sum := sha256.Sum256(body)
	return asset{body: body, version: hex.EncodeToString(sum[:8])}
}

// url is the content-addressed URL pages use for the asset.
func (a asset) url(name string) string {
	return assetPrefix + name + "?v=" + a.version
}

// New returns the explorer for the OpenAPI document at specURL (for Gatehouse,
// "/api/v1/openapi.json"), a same-origin path that the page's CSP lets the
// browser fetch. New hashes the embedded bundle (a few milliseconds); call it
// once at startup.
func New(specURL string) *UI {
	dist, err := fs.Sub(distFS, "dist")
	if err != nil {
		panic("docsui: embedded dist folder: " + err.Error()) // cannot happen: the directive embeds dist
	}
	return newUI(specURL, dist)
}

// newUI builds the UI from a folder that may hold scalar.js; tests pass their
// own to cover both the built and the unbuilt state.
func newUI(specURL string, dist fs.FS) *UI {
	u := &UI{assets: map[string]asset{initFile: newAsset(initJS)}}
	bundle, err := fs.ReadFile(dist, scalarFile)
	u.available = err == nil && len(bundle) > 0

	var buf bytes.Buffer
	if u.available {
		scalar := newAsset(bundle)
		u.assets[scalarFile] = scalar
		u.status = http.StatusOK
		err = explorerPage.Execute(&buf, map[string]string{
			"SpecURL":   specURL,
			"ScalarURL": scalar.url(scalarFile),
			"InitURL":   u.assets[initFile].url(initFile),
		})
	} else {
		u.status = http.StatusServiceUnavailable
		err = placeholderPage.Execute(&buf, map[string]string{"SpecURL": specURL})
	}
	if err != nil {
		panic("docsui: render page: " + err.Error()) // cannot happen: fixed templates, string data
	}
	u.page = buf.Bytes()
	return u
}

// Available reports whether the Scalar bundle was embedded at build time, that
// is whether Index serves the explorer rather than the placeholder page.
func (u *UI) Available() bool {
	return u.available
}

// Index serves the explorer page with the Content-Security-Policy header and
// Cache-Control: no-cache (the page names the current asset versions, so it
// must not outlive a deploy).
//
// When the bundle is missing (Available is false), it serves, with status 503
// Service Unavailable, a page saying the bundle is not built and how to build
// it: the explorer is missing from this build, and a non-2xx status keeps
// smoke tests and monitors from taking the placeholder for the explorer.
func (u *UI) Index(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set(echo.HeaderCacheControl, revalidateCache)
	return c.HTMLBlob(u.status, u.page)
}

// Asset serves the file named by the :file route parameter: "init.js" always,
// "scalar.js" when Available. Any other name, including scalar.js in a build
// without the bundle, yields echo.ErrNotFound.
//
// Assets are served as text/javascript; charset=utf-8 with an ETag (the
// content hash), honouring If-None-Match, Range and HEAD. When the ?v= query
// parameter equals the content hash, as in the URLs Index's page uses, the
// response is cacheable for a year as immutable; otherwise it must be
// revalidated (no-cache).
func (u *UI) Asset(c echo.Context) error {
	a, ok := u.assets[c.Param("file")]
	if !ok {
		return echo.ErrNotFound
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/javascript; charset=utf-8")
	h.Set(echo.HeaderXContentTypeOptions, "nosniff")
	h.Set("ETag", `"`+a.version+`"`)
	if c.QueryParam("v") == a.version {
		h.Set(echo.HeaderCacheControl, immutableCache)
	} else {
		h.Set(echo.HeaderCacheControl, revalidateCache)
	}
	http.ServeContent(c.Response(), c.Request(), "", time.Time{}, bytes.NewReader(a.body))
	return nil
}

// explorerPage mounts Scalar on #app; init.js reads data-openapi-url. The
// attribute must not be data-spec-url or data-spec, and no element may have
// id="api-reference": on load the bundle looks for those (its legacy HTML API)
// and mounts itself with the default configuration, which fetches fonts from
// fonts.scalar.com. The icon link stops the browser from requesting
// /favicon.ico.
var explorerPage = template.Must(template.New("explorer").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gatehouse API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="app" data-openapi-url="{{.SpecURL}}"></div>
<script src="{{.ScalarURL}}"></script>
<script src="{{.InitURL}}"></script>
</body>
</html>
`))

// placeholderPage is served when the bundle was not embedded.
var placeholderPage = template.Must(template.New("placeholder").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gatehouse API reference (not built)</title>
<link rel="icon" href="data:,">
</head>
<body>
<main>
<h1>Gatehouse API reference</h1>
<p>The API explorer bundle is not built. Run <code>make assets</code> (npm ci + copy) and rebuild.</p>
<p>The OpenAPI document is available at <a href="{{.SpecURL}}">{{.SpecURL}}</a>.</p>
</main>
</body>
</html>
`))
