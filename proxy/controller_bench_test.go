package proxy

import (
	"bytes"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// realEngine is an engine with the real M2HO controller, one flow past its
// handshake, and the controller in Preparation (a predicted handover), so
// every uplink ACK is clamped: the full per-packet path of m2ho mode.
func realEngine(tb testing.TB, v6 bool) (e *Engine, ctrl *m2ho.Controller, up, down []byte) {
	ctrl = m2ho.New(m2ho.Config{SignalLoss: time.Hour})
	cfg := testConfig()
	cfg.DefaultMode = ModeM2HO
	e = NewEngine(cfg, nil, ctrl, nil)
	l, s := laptop4, server4
	if v6 {
		l, s = laptop6, server6
	}
	c := conn{l, s, 7, 7, true}
	e.Process(t0, c.seg(true, syn, 1, 0, 64240, 0))
	e.Process(t0, c.seg(false, syn|ack, 1000, 2, 65160, 0))
	e.Do(func() {
		ctrl.OnEvent(t0, &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA3,
			Serving: signaling.Cell{ID: "a", Type: signaling.CellSub6}, Neighbor: signaling.Cell{ID: "b", Type: signaling.CellSub6}})
	})
	if ctrl.State() != m2ho.Preparation {
		tb.Fatalf("controller in %v, want preparation", ctrl.State())
	}
	return e, ctrl, c.seg(true, ack, 2, 1001, 40000, 0), c.seg(false, ack, 1001, 2, 500, 1400)
}

// The whole m2ho-mode path, real controller included, allocates nothing
// per packet in steady state, and does clamp.
func TestProcessRealControllerAllocs(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		e, _, up, down := realEngine(t, v6)
		ub, db := bytes.Clone(up), bytes.Clone(down)
		now := t0
		n := testing.AllocsPerRun(1000, func() {
			now = now.Add(10 * time.Microsecond) // stays within the 2·T2 of the prediction
			copy(db, down)
			e.Process(now, db)
			copy(ub, up)
			e.Process(now, ub)
		})
		if n != 0 {
			t.Errorf("v6=%v: %v allocations per packet pair", v6, n)
		}
		if s := e.Stats(); s.RewritesBy[m2ho.ReasonPreparation] == 0 {
			t.Errorf("v6=%v: no Preparation rewrite: %+v", v6, s)
		}
	}
}

// BenchmarkProcessRealController is ns per packet through the parser, the
// flow table, the real controller in Preparation and the checksum update;
// one op is one downlink data segment plus one clamped uplink ACK.
func BenchmarkProcessRealController(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		name := "v4"
		if v6 {
			name = "v6"
		}
		b.Run(name, func(b *testing.B) {
			e, _, up, down := realEngine(b, v6)
			ub, db := bytes.Clone(up), bytes.Clone(down)
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(10 * time.Nanosecond)
				copy(db, down)
				e.Process(now, db)
				copy(ub, up)
				e.Process(now, ub)
			}
		})
	}
}
