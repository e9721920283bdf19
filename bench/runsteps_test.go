package bench

import (
	"slices"
	"strings"
	"testing"
)

// A tunnel variant's connection is restarted after the emulator is up
// and before the download; the proxy still precedes the emulator (its
// signalling socket), and other variants have no tunnel steps.
func TestRunStepsTunnelAfterEmulator(t *testing.T) {
	st := runSteps(true)
	at := func(s string) int { return slices.Index(st, s) }
	if at(stepTunnelServer) != 0 || at(stepProxy) < 0 || at(stepEmulator) < at(stepProxy) || at(stepTunnelRestart) < at(stepEmulator) {
		t.Fatalf("tunnel steps %v: want the tunnel server, the proxy, the emulator, then the tunnel restart", st)
	}
	if got := runSteps(false); !slices.Equal(got, []string{stepProxy, stepEmulator}) {
		t.Fatalf("steps without a tunnel: %v", got)
	}
}

// The tunnel RTT counts from the download's launch: the lines of the
// connection dialled before the emulator's link was up are left out.
func TestReadTunnelRTTSince(t *testing.T) {
	in := "unix_ns\tlatest_ms\tsmoothed_ms\tmin_ms\n100\t1.2\t1.2\t1.0\n200\t601.0\t600.0\t1.0\n300\t602.0\t601.0\t600.0\n"
	got, err := ReadTunnelRTTSince(strings.NewReader(in), "rtt.tsv", 200)
	if err != nil || !slices.Equal(got, []float64{601, 602}) {
		t.Fatalf("got %v, %v; want [601 602]", got, err)
	}
	all, err := ReadTunnelRTT(strings.NewReader(in), "rtt.tsv")
	if err != nil || len(all) != 3 {
		t.Fatalf("ReadTunnelRTT: %v, %v", all, err)
	}
	if _, err := ReadTunnelRTT(strings.NewReader("x\t1\t1\t1\n"), "rtt.tsv"); err == nil || !strings.Contains(err.Error(), "rtt.tsv:1") {
		t.Fatalf("bad unix_ns: %v, want an error naming rtt.tsv:1", err)
	}
}
