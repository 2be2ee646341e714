// Command snapshot writes openapi/openapi.json, the committed JSON snapshot of openapi.yaml whose
// servers entry is the production origin. `make generate` runs it; `make check` fails when the
// committed file differs from its output.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gatehouse-dev/gatehouse/openapi"
)

func main() {
	origin := flag.String("origin", openapi.ProductionOrigin, "origin written into servers[0].url")
	out := flag.String("o", "openapi.json", "output file")
	flag.Parse()
	if *origin == "" {
		*origin = openapi.ProductionOrigin
	}
	b, err := openapi.JSON(*origin)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapshot:", err)
		os.Exit(1)
	}
}
