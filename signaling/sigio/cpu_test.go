package sigio

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time the test process has used (all threads).
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op: the process's CPU time per operation, which
// a machine shared with other work inflates far less than wall time.
func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(processCPU()-since)/float64(b.N), "cpu-ns/op")
}
