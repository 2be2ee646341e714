//go:build tools

// Package tools pins the code generators the build runs with `go run`, so go.mod records their
// versions.
package tools

import (
	_ "github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen"
)
