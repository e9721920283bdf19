package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// ReadKeptCellCommands finds the LTE anchor commands that name the
// serving data cell among every kind of event the emulator publishes,
// on the emulator's clock; an anchor handover to another cell and an SN
// addition naming the serving cell are not kept-cell commands; a
// malformed command line is an error naming its file and line.
func TestReadKeptCellCommands(t *testing.T) {
	start := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	mm := signaling.Cell{ID: "522", Type: signaling.CellMmWave}
	s6 := signaling.Cell{ID: "88", Type: signaling.CellSub6}
	evs := []signaling.Event{
		{Time: at(0.5), Kind: signaling.KindReport, Meas: signaling.MeasA3, Serving: signaling.Cell{Type: signaling.CellLTE}, Neighbor: signaling.Cell{Type: signaling.CellLTE}},
		{Time: at(1.25), Kind: signaling.KindHOCommand, HO: signaling.HOLTEAnchor, Serving: mm, Target: mm},
		{Time: at(1.30), Kind: signaling.KindRandomAccess, RAReason: signaling.RAHandover, RAResult: signaling.RASuccess, Serving: mm},
		{Time: at(1.31), Kind: signaling.KindMACSlot, RBRatio: 0.5, Bytes: 1000, Serving: mm},
		{Time: at(2), Kind: signaling.KindHOCommand, HO: signaling.HOLTEAnchor, Serving: mm, Target: s6},
		{Time: at(3), Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Serving: s6, Target: s6},
		{Time: at(4.5), Kind: signaling.KindHOCommand, HO: signaling.HOLTEAnchor, Serving: s6, Target: s6},
	}
	var buf bytes.Buffer
	w := signaling.NewWriter(&buf)
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadKeptCellCommands(bytes.NewReader(buf.Bytes()), "events.jsonl", start.UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	want := []KeptCellCommand{{T: 1.25, Type: "mmwave"}, {T: 4.5, Type: "sub6"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}

	bad := buf.String() + `{"t":"2026-12-06T20:00:05Z","kind":"ho","ho":"lte-anchor","target":{"id":7}}` + "\n"
	if _, err := ReadKeptCellCommands(strings.NewReader(bad), "run/emu/events.jsonl", start.UnixNano()); err == nil ||
		!strings.Contains(err.Error(), "run/emu/events.jsonl:8") {
		t.Fatalf("malformed line: %v, want an error naming run/emu/events.jsonl:8", err)
	}
}

func FuzzReadKeptCellCommands(f *testing.F) {
	f.Add(`{"t":"2026-12-06T20:00:01.25Z","kind":"ho","ho":"lte-anchor","serving":{"id":"522","type":"mmwave"},"target":{"id":"522","type":"mmwave"}}` + "\n")
	f.Add(`{"t":"2026-12-06T20:00:02Z","kind":"ho","ho":"lte-anchor","serving":{"id":"1"},"target":{"id":"1","type":"sub6"}}` + "\n{\"kind\":\"ho\",\"ho\":\"lte-anchor\"")
	start := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC).UnixNano()
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ReadKeptCellCommands(strings.NewReader(s), "events.jsonl", start)
		if err != nil {
			return
		}
		// One command per line at most, and only from lines naming an
		// LTE anchor handover.
		if n := strings.Count(s, `"lte-anchor"`); len(got) > n {
			t.Fatalf("%d kept-cell commands from %d lines naming lte-anchor", len(got), n)
		}
		for _, k := range got {
			if k.Type == "" {
				t.Fatalf("accepted %+v", k)
			}
		}
	})
}

// A kept-cell command counts the drops from 0.3 s before it (included)
// to 1 s after (excluded); the tally sums them per variant and type, and
// a run without a drop log is counted apart, not as no drop.
func TestKeptCellDropsAndTally(t *testing.T) {
	kept := []KeptCellCommand{{T: 10, Type: "mmwave"}, {T: 20, Type: "sub6"}}
	countKeptCellDrops(kept, []float64{9.69, 9.7, 10, 10.99, 11, 19.9, 30})
	if kept[0].Drops != 3 || kept[1].Drops != 1 {
		t.Fatalf("drops %d, %d; want 3 (9.7, 10, 10.99), 1 (19.9)", kept[0].Drops, kept[1].Drops)
	}
	runs := []RunResult{
		{Variant: "pass", KeptCell: kept},
		{Variant: "pass", KeptCell: []KeptCellCommand{{T: 5, Type: "mmwave", Drops: 0}, {T: 6, Type: "mmwave", Drops: -1}}},
		{Variant: "m2ho", KeptCell: []KeptCellCommand{{T: 10, Type: "mmwave"}, {T: 20, Type: "sub6"}}},
	}
	got := tallyKeptCell(runs, []string{"pass", "m2ho"})
	want := []KeptCellTally{
		{Variant: "pass", Type: "mmwave", Commands: 3, WithDrops: 1, Drops: 3, Unknown: 1},
		{Variant: "pass", Type: "sub6", Commands: 1, WithDrops: 1, Drops: 1},
		{Variant: "m2ho", Type: "mmwave", Commands: 1},
		{Variant: "m2ho", Type: "sub6", Commands: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	var b strings.Builder
	writeKeptCell(&b, got, true)
	if !strings.Contains(b.String(), "| pass | mmwave | 3 | 1 (1 without a drop log) | 3 |") || !strings.Contains(b.String(), "paused the link") {
		t.Errorf("summary.md:\n%s", b.String())
	}
}
