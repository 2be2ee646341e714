package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The structure rules that `make check` holds (go test -run 'TestLayers|TestFileSizes' .).

const module = "github.com/gatehouse-dev/gatehouse"

// layerRules: the packages under a folder (left) must not depend, even indirectly, on any
// package under the folders on the right. The store knows nothing of the product above it;
// identity knows the store; the OAuth provider knows identity and the store; server/ mounts
// them all. The examples under docs/ are products of their own: they reach Gatehouse over HTTP
// only.
var layerRules = []struct {
	under     string
	forbidden []string
}{
	{"store", []string{"oauth", "identity", "server"}},
	{"identity", []string{"oauth", "server"}},
	{"oauth", []string{"server"}},
	{"docs", []string{"store", "identity", "oauth", "server", "gen"}},
}

// listedPackage is one package of `go list`: its direct imports and all its (non-test)
// dependencies.
type listedPackage struct {
	path    string
	imports []string
	deps    []string
}

// under reports whether the import path pkg is the module's folder dir or inside it.
func under(pkg, dir string) bool {
	p := module + "/" + dir
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

// layerViolations checks pkgs against layerRules; each violation names the package, the
// forbidden dependency and the chain of imports that leads there.
func layerViolations(pkgs []listedPackage) []string {
	imports := map[string][]string{}
	for _, p := range pkgs {
		imports[p.path] = p.imports
	}
	var out []string
	for _, p := range pkgs {
		for _, rule := range layerRules {
			if !under(p.path, rule.under) {
				continue
			}
			for _, dep := range p.deps {
				for _, f := range rule.forbidden {
					if under(dep, f) {
						out = append(out, fmt.Sprintf("%s depends on %s (%s): %s/ must not depend on %s/",
							strings.TrimPrefix(p.path, module+"/"), strings.TrimPrefix(dep, module+"/"),
							importChain(imports, p.path, dep), rule.under, strings.Join(rule.forbidden, "/, ")))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// importChain is a shortest chain of imports from one package to another, "a → b → c", with
// the module prefix dropped; "" when the graph has none.
func importChain(imports map[string][]string, from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, strings.TrimPrefix(p, module+"/"))
			}
			slices.Reverse(chain)
			return strings.Join(chain, " → ")
		}
		for _, next := range imports[p] {
			if _, seen := prev[next]; !seen {
				prev[next] = p
				queue = append(queue, next)
			}
		}
	}
	return ""
}

// TestLayers holds the import rules of the architecture (layerRules) over the module's
// packages and their non-test dependencies, as `go list` reports them.
func TestLayers(t *testing.T) {
	// -deps lists every dependency as a package of its own, so that the chains can be traced.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	for line := range strings.Lines(string(out)) {
		parts := strings.Split(strings.TrimSuffix(line, "\n"), "|")
		if len(parts) != 3 {
			t.Fatalf("go list line %q", line)
		}
		pkgs = append(pkgs, listedPackage{path: parts[0], imports: strings.Fields(parts[1]), deps: strings.Fields(parts[2])})
	}
	if !slices.ContainsFunc(pkgs, func(p listedPackage) bool { return p.path == module+"/store" }) {
		t.Fatalf("go list did not report %s/store; listed %d packages", module, len(pkgs))
	}
	for _, v := range layerViolations(pkgs) {
		t.Error(v)
	}
}

// TestLayerRules checks layerViolations itself on a small graph: indirect dependencies count,
// sub-packages count, and a folder whose name only starts like a forbidden one does not.
func TestLayerRules(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	got := layerViolations([]listedPackage{
		{path: m("store"), imports: []string{m("store/seal")}, deps: []string{m("oauth"), m("store/seal"), "strings"}},
		{path: m("store/seal"), imports: []string{m("oauth")}, deps: []string{m("oauth")}},
		{path: m("oauth"), imports: []string{m("store"), m("serverless")}, deps: []string{m("serverless"), m("store")}},
		{path: m("identity/mail"), imports: []string{m("server/processor")}, deps: []string{m("server/processor")}},
		{path: m("server"), imports: []string{m("oauth")}, deps: []string{m("oauth")}},
	})
	want := []string{
		"identity/mail depends on server/processor (identity/mail → server/processor): identity/ must not depend on oauth/, server/",
		"store depends on oauth (store → store/seal → oauth): store/ must not depend on oauth/, identity/, server/",
		"store/seal depends on oauth (store/seal → oauth): store/ must not depend on oauth/, identity/, server/",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// maxFileLines is the most lines a hand-written Go file may have.
const maxFileLines = 600

// generatedHeader is Go's marker of a generated file (go help generate), before the package
// clause.
var generatedHeader = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestFileSizes: every tracked hand-written Go file has at most maxFileLines lines. Generated
// files (the header, or under gen/ and e2e/goclient/) are not counted.
func TestFileSizes(t *testing.T) {
	if err := exec.Command("git", "rev-parse", "--is-inside-work-tree").Run(); err != nil {
		t.Skip("not a git work tree: the rule covers tracked files")
	}
	out, err := exec.Command("git", "ls-files", "-z", "--", "*.go").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	checked := 0
	for _, path := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if strings.HasPrefix(path, "gen/") || strings.HasPrefix(path, "e2e/goclient/") {
			continue
		}
		src, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		header := src
		if i := bytes.Index(src, []byte("\npackage ")); i >= 0 {
			header = src[:i]
		}
		if generatedHeader.Match(header) {
			continue
		}
		checked++
		lines := bytes.Count(src, []byte("\n"))
		if len(src) > 0 && src[len(src)-1] != '\n' {
			lines++
		}
		if lines > maxFileLines {
			t.Errorf("%s: %d lines, more than %d: split it at its sections into files named by what they hold",
				path, lines, maxFileLines)
		}
	}
	if checked == 0 {
		t.Fatal("git ls-files listed no Go file")
	}
}
