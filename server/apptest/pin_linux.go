package apptest

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// childProcAttr makes the kernel send the child SIGTERM when its parent dies (AwaitParent
// returns on it).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// PinProcess pins every thread of this process to core cpu and sets GOMAXPROCS to 1 (threads
// the runtime starts later inherit the pin from the thread that starts them); tb's cleanup
// gives the process back its former cores and GOMAXPROCS.
func PinProcess(tb testing.TB, cpu int) {
	tb.Helper()
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		tb.Fatalf("pin: %v", err)
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := setThreadsAffinity(&one); err != nil {
		tb.Fatalf("pin to core %d: %v", cpu, err)
	}
	procs := runtime.GOMAXPROCS(1)
	tb.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		if err := setThreadsAffinity(&before); err != nil {
			tb.Errorf("unpin: %v", err)
		}
	})
}

// setThreadsAffinity sets the affinity of every thread of this process (/proc/self/task); a
// thread that exits meanwhile is passed over.
func setThreadsAffinity(set *unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}
