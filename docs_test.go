package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines bounds README.md: what Gatehouse is, the screenshot, the quick start, the
// first five minutes and links. Reference material goes to docs/ (docs/README.md indexes it).
const readmeMaxLines = 250

// TestReadmeLines fails when README.md grows past readmeMaxLines lines (run by make check).
func TestReadmeLines(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(raw, []byte("\n"))
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		lines++
	}
	if lines > readmeMaxLines {
		t.Errorf("README.md has %d lines, at most %d: move reference material to a page of docs/ and link it", lines, readmeMaxLines)
	}
}

// TestDocsLinks fails when a relative link in README.md or a page of docs/ names a file that
// does not exist, or a #fragment that is not a heading of its page (GitHub's anchor rule:
// lower case, punctuation dropped, spaces to hyphens). Links to other sites are not fetched.
func TestDocsLinks(t *testing.T) {
	pages := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	headingsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		raw, err := os.ReadFile(page)
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		seen := map[string]int{}
		inFence := false
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "```") {
				inFence = !inFence
			}
			if inFence || !strings.HasPrefix(line, "#") {
				continue
			}
			slug := githubAnchor(strings.TrimLeft(line, "# "))
			if n := seen[slug]; n > 0 {
				a[slug+"-"+strconv.Itoa(n)] = true
			} else {
				a[slug] = true
			}
			seen[slug]++
		}
		anchors[page] = a
		return a
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	checked := 0
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for n, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "<") {
					continue
				}
				file, fragment, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: no file %s", page, n+1, target, dest)
						continue
					}
				}
				checked++
				if fragment != "" && strings.HasSuffix(dest, ".md") && !headingsOf(dest)[fragment] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", page, n+1, target, dest, fragment)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found: is the link pattern still right?", checked)
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower case, characters other than
// letters, digits, spaces, hyphens and underscores dropped, spaces turned into hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
