package store

import (
	"strings"
	"unicode/utf8"
)

// ValidText reports whether s is text both databases store alike: valid UTF-8 without NUL.
// PostgreSQL refuses anything else in a text column (and in a query parameter compared with
// one), while SQLite stores it, so callers refuse such input before it reaches a query: the
// server at its validation step, OIDCClientByID for the client ids of protocol requests.
func ValidText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
