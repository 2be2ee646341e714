package store

import (
	"regexp"
	"testing"
)

// TestNewIDs: a batch of IDs has NewID's form, each strictly greater than the one before, the
// first greater than an ID made just before and the last smaller than one made just after.
func TestNewIDs(t *testing.T) {
	form := regexp.MustCompile(`^dec_[0-9a-hjkmnp-tv-z]{26}$`)
	before := NewID("dec")
	ids := NewIDs("dec", 100)
	after := NewID("dec")
	if len(ids) != 100 {
		t.Fatalf("%d IDs, want 100", len(ids))
	}
	prev := before
	for i, id := range append(ids, after) {
		if !form.MatchString(id) {
			t.Errorf("ID %d is %q, not of NewID's form", i, id)
		}
		if id <= prev {
			t.Errorf("ID %d (%s) does not follow %s", i, id, prev)
		}
		prev = id
	}
	if got := NewIDs("dec", 0); len(got) != 0 {
		t.Errorf("NewIDs(0) = %v", got)
	}
}

// BenchmarkNewIDs: the decision ids of a batch of 100 (server.AuthorizeBatch).
func BenchmarkNewIDs(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		NewIDs("dec", 100)
	}
}
