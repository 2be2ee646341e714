//go:build no_ui

package consoleui

import "testing"

// TestNoUIBuild: a `-tags no_ui` binary embeds no console and serves the page saying how to build it.
func TestNoUIBuild(t *testing.T) {
	if New(Dist(), "/docs/api-reference").Available() {
		t.Fatal("a no_ui build embeds a console")
	}
}
