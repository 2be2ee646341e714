package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tsClientTimeout bounds each node run of TestTypeScriptClientTypes.
const tsClientTimeout = 2 * time.Minute

// TestTypeScriptClientTypes generates the TypeScript types of the committed
// openapi/openapi.json with openapi-typescript and type-checks e2e/clients/ts/main.ts, an
// openapi-fetch client that calls sign-up, organization, project, service account, config
// put and get, role, binding and authorize, with `tsc --strict --noEmit`. The tools are the
// versions package.json pins (TypeScript 5: openapi-typescript 7 does not support 7). A spec
// change that breaks such a client fails here. Without node or the npm packages the test
// skips, or fails under GATEHOUSE_REQUIRE_NODE_E2E=1 (make test).
func TestTypeScriptClientTypes(t *testing.T) {
	root, err := filepath.Abs("..") // go test runs in e2e/
	if err != nil {
		t.Fatal(err)
	}
	node := findNodeWith(t, root, "openapi-typescript", "typescript", "openapi-fetch")
	dir := t.TempDir()
	schema := filepath.Join(dir, "openapi.d.ts")

	runNode(t, root, node, filepath.Join("node_modules", "openapi-typescript", "bin", "cli.js"),
		filepath.Join("openapi", "openapi.json"), "--output", schema)

	// The program imports its types as "gatehouse-openapi"; openapi-fetch resolves from the
	// repository's node_modules, next to the program.
	tsconfig, err := json.MarshalIndent(map[string]any{
		"compilerOptions": map[string]any{
			"target":           "ES2022",
			"module":           "ESNext",
			"moduleResolution": "Bundler",
			"lib":              []string{"ES2022", "DOM"},
			"types":            []string{},
			"paths":            map[string][]string{"gatehouse-openapi": {schema}},
		},
		"files": []string{filepath.Join(root, "e2e", "clients", "ts", "main.ts")},
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), tsconfig, 0o644); err != nil {
		t.Fatal(err)
	}
	out := runNode(t, root, node, filepath.Join("node_modules", "typescript", "bin", "tsc"),
		"--project", filepath.Join(dir, "tsconfig.json"), "--strict", "--noEmit", "--pretty", "false")
	t.Logf("tsc --strict --noEmit e2e/clients/ts/main.ts passed\n%s", out)
}

// findNodeWith returns the node executable, after checking that npm ci has installed each of
// packages under root. Otherwise it skips the test, or fails it when
// GATEHOUSE_REQUIRE_NODE_E2E=1.
func findNodeWith(t *testing.T, root string, packages ...string) string {
	t.Helper()
	skip := func(msg string) {
		t.Helper()
		if os.Getenv(requireNodeE2EEnv) == "1" {
			t.Fatalf("%s (%s=1)", msg, requireNodeE2EEnv)
		}
		t.Skipf("%s; run `make test` (it runs npm ci first), or set %s=1 to make this a failure", msg, requireNodeE2EEnv)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not installed (Node.js 20 or later)")
		return ""
	}
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(root, "node_modules", p, "package.json")); err != nil {
			skip("node_modules/" + p + " is missing")
			return ""
		}
	}
	return node
}

// runNode runs node with args in dir and returns its combined output; a failure or a
// timeout fails the test with that output.
func runNode(t *testing.T, dir, node string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tsClientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		reason := err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = "timed out after " + tsClientTimeout.String()
		}
		t.Fatalf("node %s failed (%s)\n\n----- output -----\n%s", strings.Join(args, " "), reason, strings.TrimSpace(out.String()))
	}
	return strings.TrimSpace(out.String())
}
