package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// emittedProblemKinds walks the Go source (tests excluded) under dirs and returns every problem
// kind it can emit: the values of the kind… constants, string literals given as an Error's Kind
// or as authError's kind, and the kinds of "/problems/<kind>" literals.
func emittedProblemKinds(t *testing.T, dirs ...string) []string {
	t.Helper()
	kinds := map[string]bool{}
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, name := range n.Names {
						if strings.HasPrefix(name.Name, "kind") && len(name.Name) > 4 && i < len(n.Values) {
							if s, ok := str(n.Values[i]); ok {
								kinds[s] = true
							}
						}
					}
				case *ast.CompositeLit:
					if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Error" {
						for _, el := range n.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Kind" {
								if s, ok := str(kv.Value); ok {
									kinds[s] = true
								}
							}
						}
					}
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "authError" && len(n.Args) > 1 {
						if s, ok := str(n.Args[1]); ok {
							kinds[s] = true
						}
					}
				case *ast.BasicLit:
					if s, ok := str(n); ok && strings.HasPrefix(s, "/problems/") && len(s) > len("/problems/") {
						kinds[strings.TrimPrefix(s, "/problems/")] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestProblemTypePages: every problem kind server/ and identity/ emit answers a page at its type
// URI, in the hosted pages' look and headers, and JSON for Accept: application/json; an unknown
// kind is a 404 problem.
func TestProblemTypePages(t *testing.T) {
	kinds := emittedProblemKinds(t, ".", "../identity")
	// The walk must at least find the contract's kinds (interface.md and the spec's Problem).
	for _, want := range []string{"validation", "http-401", "http-403", "http-404", "conflict", "http-4xx",
		"two-factor-required", "http-502", "unavailable", "internal"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("the source walk did not find kind %q (found %v)", want, kinds)
		}
	}
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		a := newTestApp(t, b.Open(t), testConfig())
		for _, kind := range kinds {
			res := a.do(getPage("/problems/" + kind))
			body := wantHostedPage(t, kind, res, http.StatusOK, "<h1>", testBaseURL+"/problems/"+kind)
			if res.Header().Get("Vary") != "Accept" {
				t.Errorf("%s: Vary %q, want Accept", kind, res.Header().Get("Vary"))
			}
			if strings.Contains(body, "<h1></h1>") || !strings.Contains(body, "<dt>Status</dt>") {
				t.Errorf("%s: the page has no title or no facts:\n%s", kind, body)
			}
		}

		// A bare GET (curl) gets the page too; JSON only when asked for.
		if res := a.do(request{method: http.MethodGet, path: "/problems/validation"}); res.Code != http.StatusOK ||
			!strings.HasPrefix(res.Header().Get("Content-Type"), "text/html") {
			t.Errorf("no Accept: %d %s", res.Code, res.Header().Get("Content-Type"))
		}
		var got struct {
			Data struct {
				Type, Kind, Title, Description string
				Status                         *int
				Retry                          bool
			}
		}
		json := map[string]string{"Accept": "application/json"}
		response(a.do(request{method: http.MethodGet, path: "/problems/validation", headers: json})).decode(t, http.StatusOK, &got)
		if d := got.Data; d.Type != "http://gatehouse.test/problems/validation" || d.Kind != "validation" ||
			d.Title != "Validation failed" || d.Status == nil || *d.Status != 400 || d.Retry ||
			!strings.Contains(d.Description, "errors") {
			t.Errorf("validation as JSON = %+v", d)
		}
		got.Data.Status = nil
		response(a.do(request{method: http.MethodGet, path: "/problems/unavailable", headers: json})).decode(t, http.StatusOK, &got)
		if d := got.Data; d.Status == nil || *d.Status != 503 || !d.Retry {
			t.Errorf("unavailable as JSON = %+v", d)
		}
		got.Data.Status = nil
		response(a.do(request{method: http.MethodGet, path: "/problems/http-4xx", headers: json})).decode(t, http.StatusOK, &got)
		if d := got.Data; d.Status != nil || d.Title != "Client error" {
			t.Errorf("http-4xx as JSON = %+v, want no status", d)
		}

		for _, path := range []string{"/problems/no-such-kind", "/problems/Validation", "/problems/"} {
			a.do(request{method: http.MethodGet, path: path, headers: json}).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		}
		a.do(request{method: http.MethodGet, path: "/problems/" + strings.Repeat("x", 65)}).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		a.do(request{method: http.MethodPost, path: "/problems/validation"}).
			wantProblem(t, http.StatusMethodNotAllowed, "http-4xx", "Method Not Allowed")
	})
}

// TestHealthBuildInfo: health names the build when main set it, and leaves out what is unknown.
func TestHealthBuildInfo(t *testing.T) {
	st := storetest.Backends(t)[0].Open(t)
	cfg := testConfig()
	cfg.Build = BuildInfo{Version: "v1.2.3", Commit: "0123abc", GoVersion: "go1.26.8"}
	res := newTestApp(t, st, cfg).do(request{method: http.MethodGet, path: "/api/v1/health"})
	if want := `{"commit":"0123abc","goVersion":"go1.26.8","status":"ok","version":"v1.2.3"}`; res.Code != http.StatusOK ||
		strings.TrimSpace(res.Body.String()) != want {
		t.Errorf("health = %d %s, want %s", res.Code, res.Body, want)
	}
	cfg.Build = BuildInfo{Version: "dev"}
	res = newTestApp(t, st, cfg).do(request{method: http.MethodGet, path: "/api/v1/health"})
	if want := `{"status":"ok","version":"dev"}`; strings.TrimSpace(res.Body.String()) != want {
		t.Errorf("health = %s, want %s", res.Body, want)
	}
}
