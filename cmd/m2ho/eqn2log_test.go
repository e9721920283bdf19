package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// --eqn2-log writes its header and then a line per eqn2LogEvery at most,
// each with the step's figures in the header's columns and units, and
// writes nothing that allocates on the packet path.
func TestEqn2Log(t *testing.T) {
	name := filepath.Join(t.TempDir(), "eqn2.tsv")
	l, err := openEqn2Log(name)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	s := m2ho.Eqn2Step{Rate: 18.75e6, Pipe: 15e6, RTTMin: 26900 * time.Microsecond, SRTT: 27600 * time.Microsecond,
		Eqn: 1e6, Cap: 640_000.7, Bound: 1_345_000, Queue: 126_000, Limit: 630_000, Share: 1, Wait: -4500 * time.Microsecond, InFlight: 612_345}
	for i := range 25 {
		l.trace(t0.Add(time.Duration(i)*time.Millisecond), nil, s) // 0, 10 and 20 ms make lines
	}
	noCap := s
	noCap.Cap, noCap.Bound = float64(1<<63), math.Inf(1)
	l.trace(t0.Add(30*time.Millisecond), nil, noCap)
	l.flush()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 5 || lines[0]+"\n" != eqn2Header {
		t.Fatalf("log:\n%s\nwant the header and 4 lines", b)
	}
	cols := strings.Split(strings.TrimSuffix(eqn2Header, "\n"), "\t")
	want := []int64{t0.Add(10 * time.Millisecond).UnixNano(), 18_750_000, 15_000_000, 26_900, 27_600, 1_000_000, 640_000, 1_345_000, 126_000, 630_000, 1, -4_500, 612_345}
	got := strings.Split(lines[2], "\t")
	if len(got) != len(cols) {
		t.Fatalf("line %q: %d columns, header has %d", lines[2], len(got), len(cols))
	}
	for i, w := range want {
		if v, err := strconv.ParseInt(got[i], 10, 64); err != nil || v != w {
			t.Errorf("column %s = %q, want %d", cols[i], got[i], w)
		}
	}
	if c := strings.Split(lines[4], "\t"); c[6] != "-1" || c[7] != "-1" {
		t.Errorf("no cap: cap_B = %q, bound_B = %q, want -1", c[6], c[7])
	}

	// The trace runs on the packet path: no allocation once open.
	l2, err := openEqn2Log(name)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	now := t0
	if a := testing.AllocsPerRun(100, func() {
		now = now.Add(eqn2LogEvery)
		l2.trace(now, nil, s)
	}); a != 0 {
		t.Errorf("trace allocates %.1f times per line", a)
	}
}

// --smax-log writes its header and a line per rise, the step's figures in
// the header's columns, a cell ID's control characters replaced.
func TestSMaxLog(t *testing.T) {
	name := filepath.Join(t.TempDir(), "smax.tsv")
	l, err := openSMaxLog(name)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_800_000_000, 5)
	l.trace(m2ho.SMaxStep{Cell: signaling.Cell{ID: "n261-b", Type: signaling.CellMmWave}, SMax: 2_361_162, SampleAt: at,
		Wait: 18_700 * time.Microsecond, Received: 2_400_000, Served: 2_390_000, Busy: 41_500 * time.Microsecond, Raw: 2_500_000})
	l.trace(m2ho.SMaxStep{Cell: signaling.Cell{ID: "a\tb\nc", Type: signaling.CellSub6}, SMax: 7, SampleAt: at})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	want := smaxHeader +
		"1800000000000000005\tn261-b\tmmwave\t2361162\t18700\t2400000\t2390000\t41500\t2500000\n" +
		"1800000000000000005\ta?b?c\tsub6\t7\t0\t0\t0\t0\t0\n"
	if string(b) != want {
		t.Fatalf("log:\n%s\nwant:\n%s", b, want)
	}
}
