//go:build no_ui

package consoleui

import (
	"embed"
	"io/fs"
)

// Dist is empty in a `-tags no_ui` build (pocketbase's pattern): the console is left out of
// the binary and /console/ serves the page saying how to build it.
func Dist() fs.FS {
	var empty embed.FS // the zero embed.FS is a valid, empty file system
	return empty
}
