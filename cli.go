package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/gatehouse-dev/gatehouse/server"
)

// version and commit are stamped at build time (make build and make release):
//
//	go build -ldflags "-X main.version=v0.4.0 -X main.commit=$(git rev-parse HEAD)"
//
// Unstamped, buildInfo falls back to what the Go toolchain recorded (vcs.revision).
var (
	version string
	commit  string
)

// buildInfo names the running binary: the stamped version and commit, else the module version
// and VCS revision Go recorded at build (go build in a git checkout records vcs.revision; a
// modified tree adds "-dirty"), else "dev" and no commit; and the Go release that built it.
func buildInfo() server.BuildInfo {
	b := server.BuildInfo{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		if b.Commit == "" {
			var dirty bool
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					b.Commit = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if dirty && b.Commit != "" {
				b.Commit += "-dirty"
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}

// commandHelp is each command's `gatehouse help <command>` text; the first line is its
// summary in `gatehouse --help`.
var commandHelp = []struct{ name, text string }{
	{"serve", `gatehouse [serve]
  Listen on GATEHOUSE_LISTEN_ADDR (default :8080), apply the database migrations, then serve
  the administrative API (/api/v1), the identity provider (/api/auth, /.well-known), the
  hosted pages and the API explorer (/docs) until SIGINT or SIGTERM, draining requests for
  GATEHOUSE_SHUTDOWN_TIMEOUT. A busy address stops it before anything else, with status 2.
  Without GATEHOUSE_DATABASE_URL it uses SQLite under GATEHOUSE_DATA_DIR (./data).`},
	{"migrate", `gatehouse migrate up|down
  Apply (up) or roll back (down) every database migration, then exit. serve migrates up by
  itself; use this to migrate ahead of a deploy or to start over in development.`},
	{"keys", `gatehouse keys rewrap|rotate-signing
  rewrap          re-seal every secret at rest under the current GATEHOUSE_SECRET_KEY (after
                  moving the old key to GATEHOUSE_SECRET_KEYS_OLD); nothing changes if any
                  value fails to open.
  rotate-signing  publish the next token signing key; it signs after
                  GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY (1h), and the current key stays published
                  until its tokens expire.`},
	{"dev", `gatehouse dev seed-usage -project ID [-events N] [-subjects M] [-days D]
  Write synthetic usage events, with their rollups, for project ID through the store
  (development and benchmarks).`},
	{"version", `gatehouse version
  Print the version, the source commit and the Go release of this binary (GET /api/v1/health
  reports the same).`},
	{"help", `gatehouse help [command]
  Print the list of commands, or one command's help. gatehouse --help and -h do the same.`},
}

// infoCommand runs the commands that need no configuration: help (--help, -h, help [command])
// and version. It reports whether args named one of them and the exit status.
func infoCommand(args []string, stdout, stderr io.Writer) (handled bool, status int) {
	if len(args) == 0 {
		return false, 0
	}
	switch args[0] {
	case "version", "--version", "-version":
		b := buildInfo()
		commit := b.Commit
		if commit == "" {
			commit = "unknown"
		}
		fmt.Fprintf(stdout, "gatehouse %s\ncommit %s\n%s %s/%s\n", b.Version, commit, b.GoVersion, runtime.GOOS, runtime.GOARCH)
		return true, 0
	case "help", "--help", "-help", "-h":
		if len(args) == 1 || args[0] != "help" {
			printUsage(stdout)
			return true, 0
		}
		for _, c := range commandHelp {
			if c.name == args[1] {
				fmt.Fprintln(stdout, c.text)
				return true, 0
			}
		}
		fmt.Fprintf(stderr, "gatehouse: no command %q; gatehouse --help lists them\n", args[1])
		return true, 2
	}
	return false, 0
}

// printUsage writes the `gatehouse --help` text.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Gatehouse: a control plane (organizations, projects, keys, secrets, RBAC, usage, billing)")
	fmt.Fprintln(w, "and an OAuth 2.1 / OpenID Connect identity provider, in one binary.")
	fmt.Fprintln(w, "\nUsage:")
	for _, c := range commandHelp {
		fmt.Fprintln(w, "  "+strings.SplitN(c.text, "\n", 2)[0])
	}
	fmt.Fprintln(w, "\nRun gatehouse help <command> for one command. Configuration comes from environment")
	fmt.Fprintln(w, "variables such as GATEHOUSE_DATABASE_URL (one table of them in docs/configuration.md); an invalid value")
	fmt.Fprintln(w, "exits with status 2 and one line naming the variable.")
}
