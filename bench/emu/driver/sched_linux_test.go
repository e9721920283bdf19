//go:build linux

package driver

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func threadPolicies(t *testing.T) map[int]uint32 {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint32{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // exited
		}
		out[tid] = a.Policy
	}
	return out
}

// With an RT priority every thread of the process runs SCHED_FIFO (the
// runtime's threads hand the loop's goroutine back after a preemption),
// and unpinning puts them all back.
func TestPinThreadMakesEveryThreadRealTime(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SCHED_FIFO needs root")
	}
	if err := pinThread(5); err != nil {
		t.Fatal(err)
	}
	pol := threadPolicies(t)
	unpinThread(5)
	if len(pol) < 2 {
		t.Fatalf("only %d threads seen", len(pol))
	}
	for tid, p := range pol {
		if p != unix.SCHED_FIFO {
			t.Errorf("thread %d: policy %d, want SCHED_FIFO", tid, p)
		}
	}
	for tid, p := range threadPolicies(t) {
		if p != unix.SCHED_NORMAL {
			t.Errorf("after unpinThread: thread %d: policy %d", tid, p)
		}
	}
}
