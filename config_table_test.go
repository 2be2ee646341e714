package main

import (
	"bufio"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestConfigTable: each row names one GATEHOUSE_ variable, once, with either a default value or
// a description of what unset means, one line of documentation and a parser.
func TestConfigTable(t *testing.T) {
	seen := map[string]bool{}
	for i, e := range envVars {
		switch {
		case !regexp.MustCompile(`^GATEHOUSE_[A-Z0-9_]*[A-Z0-9]$`).MatchString(e.Name):
			t.Errorf("row %d: name %q", i, e.Name)
		case seen[e.Name]:
			t.Errorf("%s: two rows", e.Name)
		case (e.Default == "") == (e.Unset == ""):
			t.Errorf("%s: want exactly one of Default (%q) and Unset (%q)", e.Name, e.Default, e.Unset)
		case e.Doc == "" || strings.Contains(e.Doc, "\n"):
			t.Errorf("%s: Doc %q, want one line", e.Name, e.Doc)
		case e.Parse == nil:
			t.Errorf("%s: no parser", e.Name)
		}
		seen[e.Name] = true
	}
}

// configDoc is the configuration reference whose table must equal envVars.
const configDoc = "docs/configuration.md"

// docVar is one variable of the configuration reference's table and its documented default.
type docVar struct{ name, def string }

// docConfigTable reads the configuration table of the configuration reference: the rows after the header
// "| Variable | Default | Meaning |". A row may name several variables ("`A`, `B`"); its
// default is then shared by all of them, or one comma-separated code span per variable, in
// order ("`a`, `b`").
func docConfigTable(t *testing.T, path string) []docVar {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := regexp.MustCompile("^`GATEHOUSE_[A-Z0-9_]+`(, `GATEHOUSE_[A-Z0-9_]+`)*$")
	spans := regexp.MustCompile("^`[^`]*`(, `[^`]*`)*$")
	var out []docVar
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "| Variable | Default | Meaning |":
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			return out
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("%s:%d: %d cells, want 3 (Variable | Default | Meaning): %s", path, n, len(cells), line)
		}
		nameCell, defCell := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if !names.MatchString(nameCell) {
			t.Fatalf("%s:%d: variable cell %q, want `GATEHOUSE_…` code spans separated by \", \"", path, n, nameCell)
		}
		vars := strings.Split(nameCell, ", ")
		defs := []string{defCell}
		if len(vars) > 1 && spans.MatchString(defCell) && len(strings.Split(defCell, ", ")) == len(vars) {
			defs = strings.Split(defCell, ", ")
		}
		for i, v := range vars {
			d := defs[0]
			if len(defs) > 1 {
				d = defs[i]
			}
			out = append(out, docVar{name: strings.Trim(v, "`"), def: d})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Fatalf("%s: no configuration table (a line \"| Variable | Default | Meaning |\")", path)
	}
	return out
}

// TestConfigTableInDocs: the configuration reference's table (docs/configuration.md) and
// envVars list the same variables in the same order, each with the same default
// (envVar.documented, compared as Markdown text).
func TestConfigTableInDocs(t *testing.T) {
	doc := docConfigTable(t, configDoc)
	documented := map[string]string{}
	var docOrder []string
	for _, r := range doc {
		if _, dup := documented[r.name]; dup {
			t.Errorf("%s: %s in two rows", configDoc, r.name)
		}
		documented[r.name] = r.def
		docOrder = append(docOrder, r.name)
	}
	var goOrder []string
	for _, e := range envVars {
		goOrder = append(goOrder, e.Name)
		def, ok := documented[e.Name]
		switch {
		case !ok:
			t.Errorf("%s is in the table of config.go but not in %s", e.Name, configDoc)
		case def != e.documented():
			t.Errorf("%s: %s's default is %s, config.go's %s", e.Name, configDoc, def, e.documented())
		}
		delete(documented, e.Name)
	}
	for _, r := range doc {
		if _, left := documented[r.name]; left {
			t.Errorf("%s is in %s's configuration table but not in config.go's", r.name, configDoc)
		}
	}
	if !t.Failed() && !slices.Equal(docOrder, goOrder) {
		i := 0
		for docOrder[i] == goOrder[i] {
			i++
		}
		t.Errorf("the tables list the variables in another order: row %d is %s in %s, %s in config.go",
			i+1, docOrder[i], configDoc, goOrder[i])
	}
}

// testOnlyVar matches the variables that only tests and benchmarks read.
var testOnlyVar = regexp.MustCompile(`^GATEHOUSE_(TEST|BENCH|REQUIRE|FUZZ)_`)

// TestConfigVariablesInTable: every GATEHOUSE_ variable that a string literal in the module's
// non-test Go code names is a row of envVars (test-only variables aside), and names are
// written out in full, never assembled from a "GATEHOUSE_" prefix.
func TestConfigVariablesInTable(t *testing.T) {
	inTable := map[string]bool{}
	for _, e := range envVars {
		inTable[e.Name] = true
	}
	mention := regexp.MustCompile(`GATEHOUSE_[A-Za-z0-9_]*`)
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != "." && err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		for _, lit := range stringLiterals(t, path) {
			for _, name := range mention.FindAllString(lit.text, -1) {
				switch {
				case testOnlyVar.MatchString(name):
				case name == "GATEHOUSE_" || strings.HasSuffix(name, "_"):
					t.Errorf("%s:%d: %q assembles a variable name; write it out in full and add it to envVars", path, lit.line, lit.text)
				case !inTable[name]:
					t.Errorf("%s:%d: %s is read or named but is not in the configuration table (envVars in config.go, and docs/configuration.md)", path, lit.line, name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("scanned %d Go files; the walk missed the module", files)
	}
}

type literal struct {
	text string
	line int
}

// stringLiterals returns the string literals of a Go file, unquoted.
func stringLiterals(t *testing.T, path string) []literal {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var s scanner.Scanner
	var errs []string
	s.Init(fset.AddFile(path, -1, len(src)), src, func(pos token.Position, msg string) {
		errs = append(errs, fmt.Sprintf("%s: %s", pos, msg))
	}, 0)
	var out []literal
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.STRING {
			continue
		}
		text, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("%s: unquote %s: %v", fset.Position(pos), lit, err)
		}
		out = append(out, literal{text: text, line: fset.Position(pos).Line})
	}
	if len(errs) > 0 {
		t.Fatalf("scan %s: %s", path, strings.Join(errs, "; "))
	}
	return out
}
