package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// --prediction-log writes one line per episode when it ends, with a real
// controller's order of calls (the outcome before the transition): a
// prediction confirmed by its command (ended by Smoothing's bound), one
// withdrawn at its deadline, and a command nobody predicted; each with
// its times, type, target, serving type and clamp.
func TestPredictionLog(t *testing.T) {
	name := filepath.Join(t.TempDir(), "predictions.tsv")
	db := m2ho.NewSMaxDB()
	db.Observe(signaling.Cell{ID: "B", Type: signaling.CellSub6}, 300_000)
	l, err := openPredLog(name, newObserver(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	ctrl := m2ho.New(m2ho.Config{Observer: l, SMaxDB: db, SignalLoss: time.Hour})
	l.hint = ctrl.Hint
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	A, B, C := signaling.Cell{ID: "A", Type: signaling.CellSub6}, signaling.Cell{ID: "B", Type: signaling.CellSub6}, signaling.Cell{ID: "C", Type: signaling.CellSub6}
	a3 := func(ms int, from, to signaling.Cell) {
		ctrl.OnEvent(at(ms), &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA3, Serving: from, Neighbor: to})
	}
	cmd := func(ms int, to signaling.Cell) {
		ctrl.OnEvent(at(ms), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNChange, Target: to})
	}
	ra := func(ms int) {
		ctrl.OnEvent(at(ms), &signaling.Event{Kind: signaling.KindRandomAccess, RAResult: signaling.RASuccess, RAReason: signaling.RAHandover})
	}
	ctrl.OnEvent(at(0), &signaling.Event{Kind: signaling.KindMACSlot, Serving: A, RBRatio: 0.2})
	a3(100, A, B) // predicted, confirmed 60 ms later
	cmd(160, B)
	ra(200)
	ctrl.Tick(at(1000)) // Smoothing's bound
	a3(2000, B, C)      // predicted, never answered
	ctrl.Tick(at(5000))
	cmd(6000, A) // unpredicted
	ra(6050)
	ctrl.Tick(at(7000))
	if ctrl.State() != m2ho.Stable {
		t.Fatalf("state %v, want stable", ctrl.State())
	}
	l.flush()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 || lines[0]+"\n" != predHeader {
		t.Fatalf("log:\n%s\nwant the header and 3 episodes", b)
	}
	type ep struct {
		start, cmd int
		outcome    string
		typ        string
		target     string
		clamp      string
		reports    string
	}
	want := []ep{
		{100, 160, "confirmed", "horizontal", "B", "300000", "nr-a3a5"},
		{2000, 0, "withdrawn-timeout", "horizontal", "C", "300000", "nr-a3a5"}, // C unknown: the least sub-6 value
		{6000, 6000, "unpredicted", "horizontal", "A", "300000", "-"},
	}
	for i, w := range want {
		f := strings.Split(lines[i+1], "\t")
		if len(f) != 9 {
			t.Fatalf("line %q: %d columns, want 9", lines[i+1], len(f))
		}
		cmdNs := "0"
		if w.cmd != 0 {
			cmdNs = strconv.FormatInt(at(w.cmd).UnixNano(), 10)
		}
		if f[0] != strconv.FormatInt(at(w.start).UnixNano(), 10) || f[2] != cmdNs || f[3] != w.outcome || f[4] != w.typ || f[5] != w.target || f[6] != "sub6" || f[7] != w.clamp || f[8] != w.reports {
			t.Errorf("episode %d: %q, want start %d ms, command %d ms, %s %s to %s from sub6, clamp %s, reports %s", i, lines[i+1], w.start, w.cmd, w.outcome, w.typ, w.target, w.clamp, w.reports)
		}
		start, _ := strconv.ParseInt(f[0], 10, 64)
		if end, err := strconv.ParseInt(f[1], 10, 64); err != nil || end <= start || (w.cmd != 0 && end < at(w.cmd).UnixNano()) {
			t.Errorf("episode %d: end %s not after its start and command", i, f[1])
		}
	}
}
