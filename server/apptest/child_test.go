package apptest

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestPinnedProcStatCPU(t *testing.T) {
	// A command name with spaces and parentheses: fields count from its last ")".
	stat := "4242 (gate) house (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 0 0"
	got, err := parseProcStatCPU(stat)
	if want := 3250 * time.Millisecond; err != nil || got != want {
		t.Errorf("parseProcStatCPU = %v, %v; want %v (utime 250 + stime 75 ticks)", got, err, want)
	}
	for _, bad := range []string{"", "4242 (gate) S 1 2", "4242 (gate) S 1 4242 4242 0 -1 4194560 1234 0 0 0 x 75"} {
		if _, err := parseProcStatCPU(bad); err == nil {
			t.Errorf("parseProcStatCPU(%q): no error", bad)
		}
	}
	if _, err := ProcCPU(os.Getpid()); err != nil && runtime.GOOS == "linux" {
		t.Errorf("ProcCPU(self): %v", err)
	}
}

func TestPinnedHandshake(t *testing.T) {
	type payload struct {
		URL  string
		Keys []string
	}
	var out strings.Builder
	out.WriteString("=== RUN   TestChild\n")
	if err := WriteHandshake(&out, payload{"http://127.0.0.1:1", []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	out.WriteString("PASS\n")
	raw, err := readHandshake(bufio.NewReader(strings.NewReader(out.String())))
	if want := `{"URL":"http://127.0.0.1:1","Keys":["a","b"]}`; err != nil || string(raw) != want {
		t.Errorf("readHandshake = %s, %v; want %s", raw, err, want)
	}
	// A child that fails before its handshake: the error carries what it printed.
	_, err = readHandshake(bufio.NewReader(strings.NewReader("--- FAIL: TestChild\n    seed: disk full\nFAIL\n")))
	if err == nil || !strings.Contains(err.Error(), "seed: disk full") {
		t.Errorf("readHandshake of a failed child: %v; want its output", err)
	}
	// A handshake line cut short (no newline: the child died writing it) is not a handshake.
	if _, err := readHandshake(bufio.NewReader(strings.NewReader(handshakePrefix + `{"URL":`))); err == nil {
		t.Error("readHandshake of a cut line: no error")
	}
}

// pinnedChildProbeEnv switches TestPinnedChildRoundTrip into its child role.
const pinnedChildProbeEnv = "GATEHOUSE_APPTEST_PINNED_PROBE"

// childProbe is what the probe child reports about itself.
type childProbe struct {
	Pid, GOMAXPROCS int
	Cpus            string
}

// TestPinnedChildRoundTrip starts this test binary as a pinned child (StartPinnedChild) on
// core 0, which reports its pid, GOMAXPROCS and allowed cores; the test's end then closes its
// input, and the child must exit cleanly (the cleanup fails the test otherwise). It also pins
// this process (PinProcess) and checks every thread, then the restore.
func TestPinnedChildRoundTrip(t *testing.T) {
	if os.Getenv(pinnedChildProbeEnv) != "" {
		// The child role (a mode switch, not a skip): report, then wait for the parent.
		if err := WriteHandshake(os.Stdout, childProbe{os.Getpid(), runtime.GOMAXPROCS(0), allowedCPUs(t, "self")}); err != nil {
			t.Fatal(err)
		}
		AwaitParent()
		return
	}
	if runtime.GOOS != "linux" {
		t.Fatalf("pinned runs need Linux, not %s", runtime.GOOS)
	}
	var probe childProbe
	pid := StartPinnedChild(t, PinnedChild{Test: "TestPinnedChildRoundTrip", Env: []string{pinnedChildProbeEnv + "=1"}, CPU: 0}, time.Minute, &probe)
	if probe != (childProbe{pid, 1, "0"}) {
		t.Errorf("child reported %+v; want pid %d, GOMAXPROCS 1, cores 0", probe, pid)
	}

	before := allowedCPUs(t, "self")
	t.Run("pin", func(t *testing.T) {
		PinProcess(t, 0)
		if n := runtime.GOMAXPROCS(0); n != 1 {
			t.Errorf("GOMAXPROCS %d after PinProcess, want 1", n)
		}
		tasks, err := filepath.Glob("/proc/self/task/*")
		if err != nil || len(tasks) == 0 {
			t.Fatalf("threads: %v %v", tasks, err)
		}
		for _, task := range tasks {
			if got := allowedCPUs(t, strings.TrimPrefix(task, "/proc/")); got != "0" {
				t.Errorf("%s allowed on cores %s after PinProcess(0), want 0", task, got)
			}
		}
	})
	if got := allowedCPUs(t, "self"); got != before {
		t.Errorf("cores %s after the pin's cleanup, want %s again", got, before)
	}
}

// allowedCPUs is Cpus_allowed_list of /proc/<proc>/status ("self", "self/task/<tid>").
func allowedCPUs(t *testing.T, proc string) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + proc + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%s/status: no Cpus_allowed_list", proc)
	return ""
}
