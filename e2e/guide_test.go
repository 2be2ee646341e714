package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// guideFile is the getting-started guide, relative to the repository root.
const guideFile = "docs/getting-started.md"

// guideFence opens a block the guide test runs; the guide states this convention at its top.
const guideFence = "```sh {guide}"

// guideSteps are the headings of the guide's sections that hold run blocks, in order: a step
// whose commands were dropped or renamed fails TestGettingStartedGuide rather than going unrun.
var guideSteps = []string{
	"## Before you start",
	"## 1. Sign up",
	"## 2. Create an organization, a project and a service account",
	"## 3. Put and read a secret",
	"## 4. Create a role and a binding, and call /authorize",
	"## 5. Send a usage event",
	"## 6. Register an OIDC client and run the code flow",
	"## 7. Verify the access token with the JWKS",
}

// guideBlock is one run block of a guide.
type guideBlock struct {
	Heading string // the nearest heading above the block, with its #s
	Line    int    // 1-based line of the opening fence
	Code    string
}

// parseGuide returns the blocks of md fenced with guideFence, in order. Lines inside any fenced
// block (a shell comment, say) are never taken for headings; an unclosed fence is an error.
func parseGuide(md string) ([]guideBlock, error) {
	var blocks []guideBlock
	heading, fence, open := "", "", 0
	var code strings.Builder
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimRight(line, " \t\r")
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence, open = trimmed, i+1
			code.Reset()
		case fence != "" && trimmed == "```":
			if fence == guideFence {
				blocks = append(blocks, guideBlock{Heading: heading, Line: open, Code: code.String()})
			}
			fence = ""
		case fence != "":
			code.WriteString(line + "\n")
		case strings.HasPrefix(trimmed, "#"):
			heading = trimmed
		}
	}
	if fence != "" {
		return nil, fmt.Errorf("line %d: the fence %q is never closed", open, fence)
	}
	return blocks, nil
}

// guideScript is one bash script that runs blocks in order and stops at the first command that
// fails (set -euo pipefail); before each block it prints a line "@@guide-block <index>", and at
// the end "@@guide-end", so that the output tells which block failed and what it printed.
func guideScript(blocks []guideBlock) string {
	var s strings.Builder
	s.WriteString("set -euo pipefail\nexec 2>&1\n")
	for i, b := range blocks {
		fmt.Fprintf(&s, "printf '\\n@@guide-block %d\\n'\n%s", i, b.Code)
	}
	s.WriteString("printf '\\n@@guide-end\\n'\n")
	return s.String()
}

// guideMarker is the line guideScript prints before a block.
var guideMarker = regexp.MustCompile(`(?m)^@@guide-block (\d+)$`)

// guideFailure explains a run of guideScript(blocks) that failed with err: the step's heading,
// the block's line and commands, and what the block printed; "" when the run completed.
func guideFailure(blocks []guideBlock, output string, err error) string {
	if err == nil && strings.HasSuffix(output, "\n@@guide-end\n") {
		return ""
	}
	marks := guideMarker.FindAllStringSubmatchIndex(output, -1)
	if len(marks) == 0 {
		return fmt.Sprintf("the guide failed before its first block (%v):\n%s", err, output)
	}
	last := marks[len(marks)-1]
	i, _ := strconv.Atoi(output[last[2]:last[3]])
	b := blocks[i]
	return fmt.Sprintf("%s: the block at %s:%d failed (%v)\n\n----- commands -----\n%s----- output -----\n%s",
		b.Heading, guideFile, b.Line, err, b.Code, strings.TrimPrefix(output[last[1]:], "\n"))
}

// TestGuideParse checks parseGuide and guideFailure on a small guide: headings inside other
// fences are not headings, other fences are not run, a failure names its step.
func TestGuideParse(t *testing.T) {
	md := "# Title\n\n## One\n\n```sh {guide}\nA=1\necho $A\n```\n\n```sh\n# not a heading\nnot run\n```\n\n" +
		"## Two\n```json\n{}\n```\n```sh {guide}\nfalse\n```\n"
	blocks, err := parseGuide(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []guideBlock{{Heading: "## One", Line: 5, Code: "A=1\necho $A\n"}, {Heading: "## Two", Line: 19, Code: "false\n"}}
	if !slices.Equal(blocks, want) {
		t.Errorf("blocks %+v, want %+v", blocks, want)
	}
	if _, err := parseGuide("## One\n```sh {guide}\necho\n"); err == nil || err.Error() != "line 2: the fence \"```sh {guide}\" is never closed" {
		t.Errorf("unclosed fence: %v", err)
	}
	msg := guideFailure(want, "\n@@guide-block 0\n1\n\n@@guide-block 1\noops\n", errors.New("exit status 1"))
	if msg != "## Two: the block at docs/getting-started.md:19 failed (exit status 1)\n\n----- commands -----\nfalse\n----- output -----\noops\n" {
		t.Errorf("failure message:\n%s", msg)
	}
	if msg := guideFailure(want, "\n@@guide-block 0\n\n@@guide-block 1\n\n@@guide-end\n", nil); msg != "" {
		t.Errorf("a completed run: %q", msg)
	}
}

// TestGettingStartedGuide runs the guide's commands (its ```sh {guide} blocks) in order, in one
// bash session started in the repository root with GATEHOUSE_URL set, against the real app on
// a fresh store: SQLite, and PostgreSQL when GATEHOUSE_TEST_POSTGRES_URL is set. The guide's
// own checks (curl --fail-with-body, jq -e) make a drifted step fail; the failure names it.
// bash, curl, jq, node and node_modules (npm ci) are required: without them the test skips,
// or fails under GATEHOUSE_REQUIRE_NODE_E2E=1 (make test).
func TestGettingStartedGuide(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	requireGuideTools(t, root)
	runGuide(t, root, guideFile, guideSteps, root, "")
}

// TestReadmeFirstFiveMinutes runs README.md's "first five minutes" block against a fresh server,
// in an empty folder (it writes cookies.txt), and wants its last command's answer: allowed.
func TestReadmeFirstFiveMinutes(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	requireGuideTools(t, root)
	runGuide(t, root, "README.md", []string{"## The first five minutes"}, "", `"allowed":true`)
}

// runGuide runs the guideFence blocks of file (relative to root) as one bash script against a
// fresh server on each backend, in dir (a new empty folder when ""), with GATEHOUSE_URL set to
// the server. The blocks must sit under exactly the headings steps, in order, and the output
// must contain want when it is not "".
func runGuide(t *testing.T, root, file string, steps []string, dir, want string) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseGuide(string(md))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var headings []string
	for _, b := range blocks {
		if len(headings) == 0 || headings[len(headings)-1] != b.Heading {
			headings = append(headings, b.Heading)
		}
	}
	if !slices.Equal(headings, steps) {
		t.Fatalf("%s: the sections with run blocks are\n%s\nwant\n%s", file, strings.Join(headings, "\n"), strings.Join(steps, "\n"))
	}
	script := filepath.Join(t.TempDir(), "guide.sh")
	if err := os.WriteFile(script, []byte(guideScript(blocks)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var logs syncBuffer
			srv := httptest.NewUnstartedServer(nil) // listens on 127.0.0.1
			base := "http://" + srv.Listener.Addr().String()
			app, err := newServer(server.Config{BaseURL: base, BodyLimit: 1 << 20, SecretKey: make([]byte, 32)},
				b.Open(t), slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			srv.Config.Handler = app.Handler()
			srv.Start()
			t.Cleanup(srv.Close)

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", script)
			cmd.Dir = dir
			if dir == "" {
				cmd.Dir = t.TempDir()
			}
			cmd.Env = append(os.Environ(), "GATEHOUSE_URL="+base, "TMPDIR="+t.TempDir()) // mktemp's cookie jar
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if msg := guideFailure(blocks, string(out), err); msg != "" {
				t.Fatalf("%s\n----- server log -----\n%s", msg, strings.TrimSpace(logs.String()))
			}
			if want != "" && !strings.Contains(string(out), want) {
				t.Fatalf("%s: the output lacks %s:\n%s", file, want, out)
			}
			t.Logf("%d blocks of %s ran in %s", len(blocks), file, time.Since(start).Round(time.Millisecond))
		})
	}
}

// requireGuideTools skips the test, or fails it under GATEHOUSE_REQUIRE_NODE_E2E=1, when a tool
// the guide uses is missing.
func requireGuideTools(t *testing.T, root string) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"bash", "curl", "jq", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, pkg := range []string{"openid-client", "jose"} {
		if _, err := os.Stat(filepath.Join(root, "node_modules", pkg, "package.json")); err != nil {
			missing = append(missing, "node_modules/"+pkg+" (npm ci)")
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "the guide needs " + strings.Join(missing, ", ")
	if os.Getenv(requireNodeE2EEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, requireNodeE2EEnv)
	}
	t.Skipf("%s; set %s=1 to make this a failure", msg, requireNodeE2EEnv)
}
