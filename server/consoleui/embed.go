//go:build !no_ui

package consoleui

import (
	"embed"
	"io/fs"
)

// distFS is the built console. On a fresh clone it holds only dist/README.md, so the
// directive always compiles; `make console` fills it.
//
//go:embed all:dist
var distFS embed.FS

// Dist is the embedded build output, rooted at dist/.
func Dist() fs.FS {
	sub, err := fs.Sub(distFS, "dist")
	if err != nil {
		panic("consoleui: embedded dist folder: " + err.Error()) // cannot happen: the directive embeds dist
	}
	return sub
}
