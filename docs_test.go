package main

import (
	"bytes"
	"os"
	"testing"
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
