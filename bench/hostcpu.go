package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The host's CPU during a run. The emulator marks a run invalid when it
// delivered late, and on a virtual machine the usual reason is that the
// hypervisor did not run the guest's CPUs (steal time): /proc/stat's
// aggregate "cpu" line, read before and after the download, says how much
// of the run's CPU time was stolen, so a reader of the summary can tell a
// starved host from a slow emulator.

// hostCPUFile is the run directory's record of it.
const hostCPUFile = "host_cpu.json"

// CPUTimes is /proc/stat's aggregate cpu line, in clock ticks.
type CPUTimes struct {
	// Busy is user+nice+system+irq+softirq; Idle is idle+iowait.
	Busy, Idle, Steal uint64
}

// HostCPU is the share of the host's CPU time between two samples.
type HostCPU struct {
	StealPct float64 `json:"steal_pct"`
	BusyPct  float64 `json:"busy_pct"`
	IdlePct  float64 `json:"idle_pct"`
}

// ReadProcStat parses the aggregate "cpu" line of /proc/stat (name is for
// errors). It needs the first eight fields (user nice system idle iowait
// irq softirq steal), as every Linux since 2.6.11 writes them.
func ReadProcStat(r io.Reader, name string) (CPUTimes, error) {
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return CPUTimes{}, fmt.Errorf("%s:%d: cpu line has %d fields, want at least 8 (user nice system idle iowait irq softirq steal)", name, line, len(f)-1)
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("%s:%d: cpu field %d %q: not a tick count", name, line, i+1, f[i+1])
			}
			v[i] = n
		}
		return CPUTimes{Busy: v[0] + v[1] + v[2] + v[5] + v[6], Idle: v[3] + v[4], Steal: v[7]}, nil
	}
	if err := sc.Err(); err != nil {
		return CPUTimes{}, fmt.Errorf("%s: %w", name, err)
	}
	return CPUTimes{}, fmt.Errorf("%s: no aggregate cpu line", name)
}

// hostCPUBetween is the CPU share from a to b; the zero value when no
// time passed or a counter went backwards (a different host or a reset).
func hostCPUBetween(a, b CPUTimes) HostCPU {
	if b.Busy < a.Busy || b.Idle < a.Idle || b.Steal < a.Steal {
		return HostCPU{}
	}
	busy, idle, steal := b.Busy-a.Busy, b.Idle-a.Idle, b.Steal-a.Steal
	total := float64(busy + idle + steal)
	if total == 0 {
		return HostCPU{}
	}
	return HostCPU{StealPct: 100 * float64(steal) / total, BusyPct: 100 * float64(busy) / total, IdlePct: 100 * float64(idle) / total}
}

// sampleCPU reads the host's /proc/stat.
func sampleCPU() (CPUTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	defer f.Close()
	return ReadProcStat(f, "/proc/stat")
}
