package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestHelpExitsZero: gatehouse --help, -h, help and help <command> print useful text on stdout
// and exit 0; an unknown command's help exits 2.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		ok, status := infoCommand(args, &stdout, &stderr)
		out := stdout.String()
		if !ok || status != 0 || stderr.Len() != 0 {
			t.Fatalf("%v: handled %v, exit %d, stderr %q", args, ok, status, stderr.String())
		}
		for _, want := range []string{"gatehouse [serve]", "gatehouse migrate up|down", "gatehouse keys rewrap|rotate-signing",
			"gatehouse version", "gatehouse help <command>", "GATEHOUSE_"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	for cmd, want := range map[string]string{
		"serve":   "address stops it before anything else",
		"migrate": "roll back (down) every database migration",
		"keys":    "GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY",
		"dev":     "seed-usage -project ID",
		"version": "the Go release",
		"help":    "gatehouse --help and -h",
	} {
		var stdout, stderr bytes.Buffer
		ok, status := infoCommand([]string{"help", cmd}, &stdout, &stderr)
		if !ok || status != 0 || !strings.Contains(stdout.String(), want) {
			t.Errorf("help %s: handled %v, exit %d, output %q; want %q", cmd, ok, status, stdout.String(), want)
		}
	}
	var stdout, stderr bytes.Buffer
	if ok, status := infoCommand([]string{"help", "frobnicate"}, &stdout, &stderr); !ok || status != 2 ||
		!strings.Contains(stderr.String(), `no command "frobnicate"`) {
		t.Errorf("help frobnicate: handled %v, exit %d, stderr %q", ok, status, stderr.String())
	}
	if ok, _ := infoCommand([]string{"serve"}, &stdout, &stderr); ok {
		t.Error("serve was handled as an information command")
	}
}

// TestVersion: gatehouse version prints the stamped version and commit and the Go release;
// unstamped (and, under go test, without VCS settings) it says dev.
func TestVersion(t *testing.T) {
	t.Cleanup(func() { version, commit = "", "" })
	version, commit = "v1.2.3", "0123456789abcdef"
	var stdout bytes.Buffer
	if ok, status := infoCommand([]string{"version"}, &stdout, &bytes.Buffer{}); !ok || status != 0 {
		t.Fatalf("handled %v, exit %d", ok, status)
	}
	want := "gatehouse v1.2.3\ncommit 0123456789abcdef\n" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if stdout.String() != want {
		t.Errorf("version printed %q, want %q", stdout.String(), want)
	}
	version, commit = "", ""
	if b := buildInfo(); b.Version != "dev" || b.GoVersion != runtime.Version() {
		t.Errorf("unstamped build info = %+v, want version dev", b)
	}
}

// TestBusyPortStopsBeforeMigrations: serve on an address another process holds exits 2 with one
// line saying "address already in use", before it creates the database or the key file.
func TestBusyPortStopsBeforeMigrations(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, v := range []string{"GATEHOUSE_LISTEN_ADDR", "GATEHOUSE_METRICS_ADDR"} {
		dir := t.TempDir()
		env := map[string]string{
			"GATEHOUSE_DATA_DIR":     filepath.Join(dir, "data"),
			"GATEHOUSE_DATABASE_URL": "sqlite:" + filepath.Join(dir, "data", "gatehouse.db"),
			"GATEHOUSE_LISTEN_ADDR":  "127.0.0.1:0",
		}
		env[v] = busy.Addr().String()
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"serve"}, func(k string) string { return env[k] }, &stderr, nil)
		out := strings.TrimSpace(stderr.String())
		if code != 2 || strings.Count(out, "\n") != 0 || !strings.Contains(out, v) ||
			!strings.Contains(out, busy.Addr().String()+": address already in use") {
			t.Errorf("%s busy: exit %d, stderr %q; want 2 and one line saying the address is already in use", v, code, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
			t.Errorf("%s busy: the data directory was created (%v): serve went past listening", v, err)
		}
	}
}
