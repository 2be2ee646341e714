//go:build !linux

package apptest

import (
	"syscall"
	"testing"
)

// childProcAttr sets nothing: only Linux has a parent-death signal (the child still ends when
// its standard input closes).
func childProcAttr() *syscall.SysProcAttr { return nil }

// PinProcess fails tb: pinning needs Linux (sched_setaffinity; taskset).
func PinProcess(tb testing.TB, cpu int) {
	tb.Helper()
	tb.Fatalf("pin to core %d: pinned runs need Linux", cpu)
}
