package m2ho

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	trans          []string // "from>to:why"
	preds          []Outcome
	lost, restored int
	stale, fresh   int
}

func (r *recorder) Transition(_ time.Time, from, to State, why string) {
	r.trans = append(r.trans, fmt.Sprintf("%v>%v:%s", from, to, why))
}
func (r *recorder) Prediction(_ time.Time, o PredictionOutcome) { r.preds = append(r.preds, o) }
func (r *recorder) SignalLost(time.Time)                        { r.lost++ }
func (r *recorder) SignalRestored(time.Time)                    { r.restored++ }
func (r *recorder) SignalStale(time.Time, time.Duration)        { r.stale++ }
func (r *recorder) SignalFresh(time.Time)                       { r.fresh++ }

func (r *recorder) last() string {
	if len(r.trans) == 0 {
		return ""
	}
	return r.trans[len(r.trans)-1]
}

// testDB is a database for the tests whose ŝ_max values are small burst
// estimates, which keep their windows readable as raw fields (60000 B:
// 469 at scale 7): SMaxDB.usable's rule (burst estimates count only
// above DefaultSMax) is off; TestBurstOverDefault tests it.
func testDB() *SMaxDB {
	db := NewSMaxDB()
	db.SetBurstOverDefault(false)
	return db
}

// fixture: a controller with a known database: sub-6 cells A (100000 B)
// and B (60000 B), LTE cell L (200000 B).
type fixture struct {
	t   *testing.T
	c   *Controller
	obs *recorder
	db  *SMaxDB
}

func newFixture(t *testing.T, mod func(*Config)) *fixture {
	db := testDB()
	db.Observe(cell(sub6, "A"), 100000)
	db.Observe(cell(sub6, "B"), 60000)
	db.Observe(cell(lte, "L"), 200000)
	obs := &recorder{}
	cfg := Config{Observer: obs, SMaxDB: db}
	if mod != nil {
		mod(&cfg)
	}
	return &fixture{t: t, c: New(cfg), obs: obs, db: db}
}

func (fx *fixture) ev(ms int, e *signaling.Event) { fx.c.OnEvent(at(ms), e) }

func (fx *fixture) want(s State) {
	fx.t.Helper()
	if fx.c.State() != s {
		fx.t.Fatalf("state %v, want %v (transitions %v)", fx.c.State(), s, fx.obs.trans)
	}
}

func (fx *fixture) pkt(ms int, f *Flow, p *Packet) Verdict { return fx.c.OnPacket(at(ms), f, p) }

// Packet builders.
func upACK(ack uint32, win uint16, ws int8) *Packet {
	return &Packet{Dir: Uplink, Flags: FlagACK, Ack: ack, Window: win, WScale: ws}
}
func down(seq uint32, n int) *Packet {
	return &Packet{Dir: Downlink, Flags: FlagACK | FlagPSH, Seq: seq, PayloadLen: n, WScale: 7}
}
func a3(nbType signaling.CellType, nbID string) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA3,
		Serving: signaling.Cell{ID: "S", Type: nbType}, Neighbor: signaling.Cell{ID: nbID, Type: nbType}}
}
func a1() *signaling.Event {
	return &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA1}
}
func raEv(r signaling.RAResult, why signaling.RAReason) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindRandomAccess, RAResult: r, RAReason: why}
}
func slotEv(rb float64, b int) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindMACSlot, RBRatio: rb, Bytes: b}
}

func attach(fx *fixture, ms int) *Flow {
	f := new(Flow)
	fx.c.Attach(at(ms), f)
	return f
}

var pass = Verdict{}

func rewrite(w uint16, r Reason) Verdict { return Verdict{Action: Rewrite, Window: w, Reason: r} }

var drop = Verdict{Action: Drop, Reason: ReasonSmoothing}

func check(t *testing.T, what string, got, want Verdict) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: verdict %+v, want %+v", what, got, want)
	}
}

// Before any signalling the controller passes everything; the first event
// ends pass-through.
func TestPassThroughUntilFirstEvent(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	if !fx.c.Hint().PassThrough {
		t.Fatal("not in pass-through before any event")
	}
	fx.c.cfg.SMaxDB = nil
	fx.ev(0, a3(sub6, "A")) // prediction: Preparation
	fx.want(Preparation)
	if fx.c.Hint().PassThrough || fx.obs.restored != 0 {
		t.Fatalf("hint %+v restored %d", fx.c.Hint(), fx.obs.restored)
	}
	// SMaxDB nil: DefaultSMax = 65536 → raw ceil(65536/128) = 512.
	check(t, "clamp with nil db", fx.pkt(1, f, upACK(1, 65535, 7)), rewrite(512, ReasonPreparation))
}

// Stable → Preparation on a prediction, clamp to the predicted target's
// ŝ_max; → Stable on A1 and the clamp is gone. Algorithm 1: any A1
// withdraws (Streams: TestStreamsA1WithdrawsOnlyWorsening).
func TestPredictionClampAndWithdrawA1(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.Rules = Algorithm1 })
	f := attach(fx, 0)
	fx.ev(0, slotEv(0, 0))
	check(t, "stable", fx.pkt(1, f, upACK(1, 65535, 7)), pass)
	fx.ev(10, a3(sub6, "A"))
	fx.want(Preparation)
	if fx.obs.last() != "stable>preparation:handover predicted" {
		t.Fatalf("transition %q", fx.obs.last())
	}
	// ŝ_max(A) = 100000 B, one flow: raw = ceil(100000/128) = 782 (782·128 = 100096).
	check(t, "clamp", fx.pkt(11, f, upACK(1, 65535, 7)), rewrite(782, ReasonPreparation))
	h := fx.c.Hint()
	if h.SMax != 100000 || h.Target.ID != "A" || h.State != Preparation {
		t.Fatalf("hint %+v", h)
	}
	fx.ev(20, a1())
	fx.want(Stable)
	if fx.obs.last() != "preparation>stable:prediction withdrawn: A1" {
		t.Fatalf("transition %q", fx.obs.last())
	}
	// The window opens gradually (Controller.release): the same ACK keeps
	// the held edge (1 + 782·128); each ACK adds what it acknowledges
	// (edge 100097 + 2·50000, window 150096: raw 1173); an ACK past the
	// edge gets the laptop's own window, and so does the next one.
	check(t, "after withdrawal", fx.pkt(21, f, upACK(1, 65535, 7)), rewrite(782, ReasonRelease))
	check(t, "opening", fx.pkt(22, f, upACK(50001, 65535, 7)), rewrite(1173, ReasonRelease))
	check(t, "open", fx.pkt(23, f, upACK(250001, 65535, 7)), pass)
	check(t, "stays open", fx.pkt(24, f, upACK(250002, 65535, 7)), pass)
	if n := len(fx.obs.preds); n != 2 || fx.obs.preds[0].Kind != OutcomePredicted || fx.obs.preds[1].Reason != WithdrawA1 {
		t.Fatalf("predictions %+v", fx.obs.preds)
	}
}

// Withdrawal at 2·T2 with T2 learned from a confirmed handover (100 ms),
// applied by OnPacket's own now, and by Tick. Algorithm 1's deadline
// (Streams: TestStreamsWithdrawAtStreamDeadline).
func TestWithdrawTimeoutLearnedT2(t *testing.T) {
	for _, viaTick := range []bool{false, true} {
		fx := newFixture(t, func(c *Config) { c.Rules = Algorithm1 })
		f := attach(fx, 0)
		fx.ev(0, a3(sub6, "A"))
		fx.ev(100, command(signaling.HOIntraNR, sub6, "A"))
		fx.ev(110, raEv(signaling.RASuccess, signaling.RAHandover))
		fx.want(Smoothing)
		fx.c.Tick(at(300)) // smoothing bound
		fx.want(Stable)
		if fx.c.Predictor().T2() != 100*time.Millisecond {
			t.Fatalf("T2 %v", fx.c.Predictor().T2())
		}
		fx.ev(1000, a3(sub6, "B"))
		fx.want(Preparation)
		// ŝ_max(B) = 60000: raw ceil(60000/128) = 469.
		check(t, "clamp", fx.pkt(1199, f, upACK(1, 65535, 7)), rewrite(469, ReasonPreparation))
		if viaTick {
			fx.c.Tick(at(1200))
			fx.want(Stable)
		} else {
			check(t, "at deadline", fx.pkt(1200, f, upACK(1, 65535, 7)), rewrite(469, ReasonRelease))
		}
		fx.want(Stable)
		if !strings.Contains(fx.obs.last(), "no command within 2·T2") {
			t.Fatalf("transition %q", fx.obs.last())
		}
		last := fx.obs.preds[len(fx.obs.preds)-1]
		if last.Kind != OutcomeWithdrawn || last.Reason != WithdrawTimeout || !last.At.Equal(at(1200)) {
			t.Fatalf("outcome %+v", last)
		}
	}
}

// With the default Streams rules an A1 withdraws only a prediction the
// serving cell's getting worse made (A2, A5) on its own RAT and cell: an
// A3 (a neighbour getting better) stays live and keeps the clamp.
func TestStreamsA1WithdrawsOnlyWorsening(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, slotEv(0, 0))
	fx.ev(10, a3(sub6, "A"))
	fx.want(Preparation)
	fx.ev(20, a1())
	fx.want(Preparation)
	check(t, "clamp after A1", fx.pkt(21, f, upACK(1, 65535, 7)), rewrite(782, ReasonPreparation))
	fx.ev(100, command(signaling.HOIntraNR, sub6, "A"))
	fx.ev(110, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(300))
	fx.want(Stable)

	a5 := &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA5,
		Serving: cell(sub6, "A"), Neighbor: cell(sub6, "B")}
	fx.ev(1000, a5)
	fx.want(Preparation)
	fx.ev(1010, &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA1, Serving: cell(sub6, "A")})
	fx.want(Stable)
	if fx.obs.last() != "preparation>stable:prediction withdrawn: A1" {
		t.Fatalf("transition %q", fx.obs.last())
	}
}

// With the default Streams rules a prediction lasts until its stream's
// deadline, the last report plus its kind's answer margin: for an A3 (SN
// change) at least 500 ms, longer than the longest reportInterval a
// multi-shot re-send can take, whatever T2 was learned (here 100 ms).
func TestStreamsWithdrawAtStreamDeadline(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, a3(sub6, "A"))
	fx.ev(100, command(signaling.HOIntraNR, sub6, "A"))
	fx.ev(110, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(300))
	fx.want(Stable)
	fx.ev(1000, a3(sub6, "B"))
	fx.want(Preparation)
	check(t, "clamp", fx.pkt(1499, f, upACK(1, 65535, 7)), rewrite(469, ReasonPreparation))
	check(t, "at deadline", fx.pkt(1500, f, upACK(1, 65535, 7)), rewrite(469, ReasonRelease)) // opening (Controller.release)
	fx.want(Stable)
	if fx.obs.last() != "preparation>stable:prediction withdrawn: no command by the report streams' deadline" {
		t.Fatalf("transition %q", fx.obs.last())
	}
	last := fx.obs.preds[len(fx.obs.preds)-1]
	if last.Kind != OutcomeWithdrawn || last.Reason != WithdrawTimeout || !last.At.Equal(at(1500)) {
		t.Fatalf("outcome %+v", last)
	}
}

// A command with no prediction clamps at once, with the command target's
// ŝ_max; a predicted handover's clamp moves to the commanded target.
func TestCommandClamp(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, slotEv(0, 0))
	fx.ev(10, command(signaling.HOIntraNR, sub6, "B"))
	fx.want(Preparation)
	if fx.obs.last() != "stable>preparation:handover command without prediction" {
		t.Fatalf("transition %q", fx.obs.last())
	}
	check(t, "clamp B", fx.pkt(11, f, upACK(1, 65535, 7)), rewrite(469, ReasonPreparation))
	if fx.obs.preds[0].Kind != OutcomeUnpredicted {
		t.Fatalf("outcome %+v", fx.obs.preds[0])
	}

	fx = newFixture(t, nil)
	f = attach(fx, 0)
	fx.ev(0, a3(sub6, "B"))
	check(t, "predicted B", fx.pkt(1, f, upACK(1, 65535, 7)), rewrite(469, ReasonPreparation))
	fx.ev(50, command(signaling.HOIntraNR, lte, "L")) // the network chose L
	fx.want(Preparation)
	// ŝ_max(L) = 200000: raw ceil(200000/128) = 1563 (1562.5).
	check(t, "commanded L", fx.pkt(51, f, upACK(1, 65535, 7)), rewrite(1563, ReasonPreparation))
	if len(fx.obs.trans) != 1 {
		t.Fatalf("command in Preparation changed state: %v", fx.obs.trans)
	}
	// mmWave target: the minimum sub-6 value (60000 B). The edge the
	// sender holds (1 + 1563·128) is not taken back (Controller.clamp):
	// at the same ACK the window stays; once the ACK passes it, the clamp
	// is the new target's.
	fx.ev(60, command(signaling.HOIntraNR, mmw, "M9"))
	check(t, "commanded mmWave, same ACK", fx.pkt(61, f, upACK(1, 65535, 7)), rewrite(1563, ReasonPreparation))
	check(t, "commanded mmWave", fx.pkt(62, f, upACK(200001, 65535, 7)), rewrite(469, ReasonPreparation))
}

// Random access: failure keeps Preparation; success (any reason) after a
// command enters Smoothing; success without a command changes nothing; no
// success within the execution bound returns to Stable.
func TestRandomAccess(t *testing.T) {
	fx := newFixture(t, nil)
	fx.ev(0, raEv(signaling.RASuccess, signaling.RAULData))
	fx.want(Stable)
	fx.ev(10, command(signaling.HOIntraNR, sub6, "A"))
	fx.ev(20, raEv(signaling.RAFailure, signaling.RAHandover))
	fx.want(Preparation)
	fx.ev(30, raEv(signaling.RAAborted, signaling.RAHandover))
	fx.want(Preparation)
	fx.ev(40, raEv(signaling.RASuccess, signaling.RAOther))
	fx.want(Smoothing)
	if fx.obs.last() != "preparation>smoothing:random access success" || fx.c.Hint().Serving.ID != "A" {
		t.Fatalf("transition %q hint %+v", fx.obs.last(), fx.c.Hint())
	}

	fx = newFixture(t, nil)
	fx.ev(0, command(signaling.HOIntraNR, sub6, "A"))
	fx.ev(500, raEv(signaling.RAFailure, signaling.RAHandover))
	fx.c.Tick(at(999))
	fx.want(Preparation)
	fx.c.Tick(at(1000))
	fx.want(Stable)
	if !strings.Contains(fx.obs.last(), "execution bound") {
		t.Fatalf("transition %q", fx.obs.last())
	}
	// A late success does not enter Smoothing.
	fx.ev(1100, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.want(Stable)
}

// toSmoothing brings fx into Smoothing with flow f having received
// [seq0, seq0+n) before the command (at t=100; RA success at t=130).
func toSmoothing(fx *fixture, f *Flow, seq0 uint32, n int) {
	// The laptop's last ACK before the prediction (it left the phone):
	// an ACK there later is a duplicate, above it is not.
	fx.pkt(0, f, upACK(seq0+uint32(n/2), 65535, 7))
	fx.ev(0, a3(sub6, "A"))
	fx.pkt(50, f, down(seq0, n))
	fx.ev(100, command(signaling.HOIntraNR, sub6, "A"))
	fx.ev(130, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.want(Smoothing)
}

// Release rule (a), per flow: duplicate pure ACKs below what the flow had
// at the command are dropped; an ACK reaching it passes and releases the
// flow; one that advances the cumulative ACK short of it passes and does
// not release. Data, SYN, FIN, RST are never dropped. Data arriving after
// the command does not move the mark.
func TestSmoothingReleaseBySeq(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	g := attach(fx, 0) // no data before the command: never held back
	toSmoothing(fx, f, 1000, 1000)
	fx.pkt(131, f, down(5000, 1000)) // flushed/forwarded data after the command
	tests := []struct {
		name string
		flow *Flow
		p    *Packet
		want Verdict
	}{
		{"dup ACK", f, upACK(1500, 65535, 7), drop},
		{"dup ACK again", f, upACK(1500, 65535, 7), drop},
		// ŝ_max(A) = 100000 B: the active flow f alone, ceil(100000/128)
		// = 782; idle g counts itself with f, ceil(50000/128) = 391.
		{"ACK with payload", f, &Packet{Dir: Uplink, Flags: FlagACK | FlagPSH, Ack: 1500, PayloadLen: 10, Window: 100, WScale: 7}, pass},
		{"SYN", f, &Packet{Dir: Uplink, Flags: FlagSYN | FlagACK, Ack: 1500, WScale: 7}, pass},
		{"FIN", f, &Packet{Dir: Uplink, Flags: FlagFIN | FlagACK, Ack: 1500, WScale: 7}, pass},
		{"RST", f, &Packet{Dir: Uplink, Flags: FlagRST | FlagACK, Ack: 1500, WScale: 7}, pass},
		{"no ACK flag", f, &Packet{Dir: Uplink, Flags: 0, Ack: 1500, WScale: 7}, pass},
		{"downlink", f, down(6000, 100), pass},
		{"flow without data at the command: clamped", g, upACK(1, 65535, 7), rewrite(391, ReasonPreparation)},
		{"advances, one short of the mark: passes, clamped", f, upACK(1999, 65535, 7), rewrite(782, ReasonPreparation)},
		{"dup of that", f, upACK(1999, 65535, 7), drop},
		{"reaches the mark: released, clamped", f, upACK(2000, 65535, 7), rewrite(782, ReasonPreparation)},
		{"dup ACK after release", f, upACK(2000, 65535, 7), rewrite(782, ReasonPreparation)},
	}
	for i, tc := range tests {
		check(t, tc.name, fx.pkt(131+i, tc.flow, tc.p), tc.want)
	}
	fx.want(Smoothing) // rule (a) releases flows, not the state
}

// Rule (a) across the sequence wrap: the mark is past 2^32.
func TestSmoothingReleaseWraparound(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, slotEv(0, 0))
	fx.pkt(10, f, down(0xFFFFFE00, 0x100)) // high = 0xFFFFFF00
	fx.pkt(11, f, down(0xFFFFFF00, 0x200)) // high = 0x00000100 (wrapped)
	fx.pkt(12, f, down(0xFFFFFE00, 0x100)) // retransmission: high stays
	toSmoothing(fx, f, 0xFFFFFF00, 0x100)  // old data again: high stays 0x100
	check(t, "before the wrap, a duplicate", fx.pkt(131, f, upACK(0xFFFFFF80, 65535, 7)), drop)
	check(t, "after the wrap, short: advances", fx.pkt(132, f, upACK(0x000000FF, 65535, 7)), rewrite(782, ReasonPreparation))
	check(t, "after the wrap, a duplicate", fx.pkt(132, f, upACK(0x000000FF, 65535, 7)), drop)
	check(t, "older than the last forwarded", fx.pkt(132, f, upACK(0xFFFFFFF0, 65535, 7)), drop)
	check(t, "at the mark", fx.pkt(133, f, upACK(0x00000100, 65535, 7)), rewrite(782, ReasonPreparation))
	// An older ACK keeps the edge 0x100 + 782·128 the sender holds:
	// ceil((0x100 + 100096 − 0xFFFFFFF0)/128) = 785.
	check(t, "released", fx.pkt(134, f, upACK(0xFFFFFFF0, 65535, 7)), rewrite(785, ReasonPreparation))
}

// Release rule (b): the first burst that ends in the target cell. A burst
// begun before random access does not count.
func TestSmoothingReleaseByBurst(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, a3(sub6, "A"))
	fx.pkt(50, f, down(1000, 1000))
	fx.pkt(60, f, upACK(1500, 65535, 7))
	fx.ev(100, command(signaling.HOIntraNR, sub6, "A"))
	fx.ev(120, slotEv(0.95, 5000)) // a burst starts before execution
	fx.ev(130, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.ev(131, slotEv(0.3, 10))
	fx.ev(132, slotEv(0, 0)) // would end the old burst: it was reset
	fx.want(Smoothing)
	check(t, "still dropping", fx.pkt(132, f, upACK(1500, 65535, 7)), drop)
	fx.ev(133, slotEv(0.99, 8000))
	fx.ev(134, slotEv(0.2, 100))
	fx.want(Smoothing)
	fx.ev(135, slotEv(0, 0))
	fx.want(Stable)
	if fx.obs.last() != "smoothing>stable:first burst in the target cell ended" {
		t.Fatalf("transition %q", fx.obs.last())
	}
	// Released: the held edge stays until ACKs move it (Controller.release).
	check(t, "released", fx.pkt(136, f, upACK(1500, 65535, 7)), rewrite(782, ReasonRelease))
}

// Release rule (c): the hard bound, counted from the handover command, by
// OnPacket's now and by Tick.
func TestSmoothingReleaseByBound(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	toSmoothing(fx, f, 1000, 1000)
	check(t, "just before the bound", fx.pkt(249, f, upACK(1500, 65535, 7)), drop)
	check(t, "at the bound", fx.pkt(250, f, upACK(1500, 65535, 7)), pass)
	fx.want(Stable)
	if fx.obs.last() != "smoothing>stable:smoothing bound" {
		t.Fatalf("transition %q", fx.obs.last())
	}

	// The bound counts from the command (t=100), where suppression starts.
	fx = newFixture(t, func(c *Config) { c.SmoothingBound = 50 * time.Millisecond })
	toSmoothing(fx, attach(fx, 0), 1000, 1000)
	fx.c.Tick(at(149))
	fx.want(Smoothing)
	fx.c.Tick(at(150))
	fx.want(Stable)
}

// A new handover while Smoothing: a command or a prediction ends the
// smoothing and enters Preparation; the new command takes a new mark.
func TestHandoverDuringSmoothing(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	toSmoothing(fx, f, 1000, 1000)
	fx.pkt(131, f, down(2000, 1000)) // high 3000, mark still 2000
	fx.ev(140, command(signaling.HOIntraNR, sub6, "B"))
	fx.want(Preparation)
	if fx.obs.last() != "smoothing>preparation:handover command during smoothing" {
		t.Fatalf("transition %q", fx.obs.last())
	}
	// Between the command and random access, ACKs that leave a hole are
	// suppressed (the flush has happened); one that covers all is clamped.
	check(t, "hole ACK after the command", fx.pkt(141, f, upACK(1500, 65535, 7)), drop)
	check(t, "clamp to B", fx.pkt(142, f, upACK(3000, 65535, 7)), rewrite(469, ReasonPreparation))
	fx.ev(150, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.want(Smoothing)
	check(t, "old mark is not enough", fx.pkt(151, f, upACK(2000, 65535, 7)), drop)
	check(t, "new mark", fx.pkt(152, f, upACK(3000, 65535, 7)), rewrite(469, ReasonPreparation))

	fx = newFixture(t, nil)
	f = attach(fx, 0)
	toSmoothing(fx, f, 1000, 1000)
	fx.ev(140, a3(sub6, "B"))
	fx.want(Preparation)
	if fx.obs.last() != "smoothing>preparation:handover predicted during smoothing" {
		t.Fatalf("transition %q", fx.obs.last())
	}
	check(t, "clamp to B", fx.pkt(141, f, upACK(1500, 65535, 7)), rewrite(469, ReasonPreparation))
}

// The clamp: window scale, shares, never above the original, never below
// two segments.
func TestPreparationClampTable(t *testing.T) {
	tests := []struct {
		name   string
		smax   int
		active int // other flows with downlink payload
		p      Packet
		want   Verdict
	}{
		{"no window scale seen", 100000, 0, Packet{Window: 65535, WScale: -1}, pass},
		{"scale 0: bytes", 30000, 0, Packet{Window: 65535, WScale: 0}, rewrite(30000, ReasonPreparation)},
		{"scale 2, 1 flow", 120000, 0, Packet{Window: 65535, WScale: 2}, rewrite(30000, ReasonPreparation)},
		{"scale 2, 2 flows", 120000, 1, Packet{Window: 65535, WScale: 2}, rewrite(15000, ReasonPreparation)},
		{"scale 2, 3 flows", 120000, 2, Packet{Window: 65535, WScale: 2}, rewrite(10000, ReasonPreparation)},
		{"rounds up: 10001/4 → 2501", 30003, 2, Packet{Window: 65535, WScale: 2}, rewrite(2501, ReasonPreparation)},
		{"share above original", 120000, 0, Packet{Window: 100, WScale: 0}, pass},
		{"share equals original", 25600, 0, Packet{Window: 200, WScale: 7}, pass},
		{"floor 2·1460 (MSS unknown): ceil(2920/128) = 23", 1000, 0, Packet{Window: 65535, WScale: 7}, rewrite(23, ReasonPreparation)},
		{"floor 2·536: ceil(1072/128) = 9", 1000, 0, Packet{Window: 65535, WScale: 7, MSS: 536}, rewrite(9, ReasonPreparation)},
		{"floor 2·1460 at scale 0", 1000, 0, Packet{Window: 65535, WScale: 0}, rewrite(2920, ReasonPreparation)},
		{"original below 2 MSS is kept", 1000, 0, Packet{Window: 2000, WScale: 0}, pass},
		{"floor would round above original", 1000, 0, Packet{Window: 22, WScale: 7}, pass},
		{"scale 14 cap", 1 << 20, 0, Packet{Window: 1000, WScale: 14}, rewrite(64, ReasonPreparation)},
		{"scale 15 treated as 14", 1 << 20, 0, Packet{Window: 1000, WScale: 15}, rewrite(64, ReasonPreparation)},
		{"zero window stays", 100000, 0, Packet{Window: 0, WScale: 7}, pass},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := testDB()
			db.Observe(cell(sub6, "T"), tc.smax)
			c := New(Config{SMaxDB: db})
			others := make([]Flow, tc.active)
			for i := range others {
				c.Attach(at(0), &others[i])
				c.OnPacket(at(1), &others[i], down(1, 1000))
			}
			f := new(Flow)
			c.Attach(at(0), f)
			c.OnPacket(at(1), f, down(1, 1000)) // f is active too
			c.OnEvent(at(2), a3(sub6, "T"))
			p := tc.p
			p.Dir, p.Flags = Uplink, FlagACK
			check(t, tc.name, c.OnPacket(at(3), f, &p), tc.want)
		})
	}
}

// Active flows: an idle flow counts itself in its share; a flow stops
// counting one to two windows after its last payload; Detach forgets it.
func TestActiveFlows(t *testing.T) {
	db := testDB()
	db.Observe(cell(sub6, "T"), 120000)
	c := New(Config{SMaxDB: db}) // window 1 s
	var f, g, idle Flow
	c.Attach(at(0), &f)
	c.Attach(at(0), &g)
	c.Attach(at(0), &idle)
	c.OnPacket(at(0), &f, down(1, 100))
	c.OnPacket(at(0), &g, down(1, 100))
	c.OnEvent(at(1), a3(sub6, "T"))
	up := func(ms int, fl *Flow) Verdict { return c.OnPacket(at(ms), fl, upACK(1, 65535, 2)) }
	check(t, "2 active", up(2, &f), rewrite(15000, ReasonPreparation))
	check(t, "idle flow counts itself: 3", up(2, &idle), rewrite(10000, ReasonPreparation))
	if c.ActiveFlows() != 2 {
		t.Fatalf("active %d", c.ActiveFlows())
	}
	// Keep the prediction alive while time passes (a new one each 300 ms
	// would be a repeat; use A1 + A3 to restart it).
	keep := func(ms int) {
		c.OnEvent(at(ms), a1())
		c.OnEvent(at(ms), a3(sub6, "T"))
	}
	// Epoch 2 (t in [1000, 2000)): g still active from the previous epoch.
	c.OnPacket(at(1500), &f, down(101, 100))
	keep(1500)
	check(t, "g in previous epoch", up(1501, &f), rewrite(15000, ReasonPreparation))
	// Epoch 3 (t ≥ 2000): g's last payload is two epochs old.
	c.OnPacket(at(2100), &f, down(201, 100))
	keep(2100)
	check(t, "g expired", up(2101, &f), rewrite(30000, ReasonPreparation))
	if c.ActiveFlows() != 1 {
		t.Fatalf("active %d", c.ActiveFlows())
	}
	c.Detach(&f)
	if c.ActiveFlows() != 0 {
		t.Fatalf("active after detach %d", c.ActiveFlows())
	}
	check(t, "detached flow passes", up(2102, &f), pass)
	var zero Flow
	check(t, "never attached flow passes", c.OnPacket(at(2103), &zero, upACK(1, 65535, 2)), pass)
	// A long silence resets both epochs.
	c.OnPacket(at(2200), &g, down(1, 100))
	c.OnPacket(at(9000), &idle, down(1, 100))
	if c.ActiveFlows() != 1 {
		t.Fatalf("active after silence %d", c.ActiveFlows())
	}
}

// tsFlow drives Eqn 2's inputs for one flow with timestamps, RTT 50 ms and
// 10000 B per RTT, ending at t=100 ms (PerRTT rate 200000 B/s).
func tsFlow(c *Controller, f *Flow) {
	ack := func(ms int, tsval uint32) {
		c.OnPacket(at(ms), f, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: tsval})
	}
	data := func(ms int, seq uint32, ecr uint32) {
		c.OnPacket(at(ms), f, &Packet{Dir: Downlink, Flags: FlagACK, Seq: seq, PayloadLen: 10000, WScale: 7, HasTS: true, TSval: 9, TSecr: ecr})
	}
	ack(0, 1)
	data(50, 0, 1) // RTT 50 ms; opens the estimator's interval
	ack(50, 2)
	data(100, 10000, 2) // RTT 50 ms; closes 10000 B / 0.05 s = 200000 B/s
}

func TestStableRateEqn2(t *testing.T) {
	upTS := &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: 3}
	upNoTS := &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7}

	// RTT = RTT_min = 50 ms, c_est = 200000 B/s · 0.05 s = 10000 B:
	// rwnd = 2·10000·50/50 = 20000 B → raw ceil(20000/128) = 157.
	c := New(Config{})
	c.eqn2Armed = true // as after a handover mmWave → sub-6 (TestEqn2Arming)
	c.OnEvent(at(0), slotEv(0, 0))
	var f Flow
	c.Attach(at(0), &f)
	tsFlow(c, &f)
	if s, m, n := f.RTT(); s != 50*time.Millisecond || m != 50*time.Millisecond || n != 2 {
		t.Fatalf("rtt %v %v %d", s, m, n)
	}
	check(t, "eqn 2", c.OnPacket(at(101), &f, upTS), rewrite(157, ReasonStableRate))
	if h := c.Hint(); h.CEst != 200000 || h.SMax != 0 {
		t.Fatalf("hint %+v", h)
	}
	check(t, "without timestamps the same flow is still clamped (RTT known)", c.OnPacket(at(101), &f, upNoTS), rewrite(157, ReasonStableRate))
	check(t, "never raises: small original", c.OnPacket(at(101), &f, &Packet{Dir: Uplink, Flags: FlagACK, Window: 100, WScale: 7}), pass)
	check(t, "no window scale", c.OnPacket(at(101), &f, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: -1}), pass)

	// A flow that never carried timestamps is never touched.
	var g Flow
	c.Attach(at(0), &g)
	c.OnPacket(at(102), &g, down(0, 10000))
	check(t, "flow without timestamps", c.OnPacket(at(103), &g, upNoTS), pass)

	// Queueing: the second RTT sample is 100 ms. srtt = 50 + (100-50)/8 =
	// 56.25 ms, RTT_min 50 ms; the interval [50, 150) closes with
	// 10000 B / 0.1 s = 100000 B/s; c_est = 100000·0.05625 = 5625 B;
	// rwnd = 2·5625·50/56.25 = 10000 B → raw ceil(10000/128) = 79.
	c = New(Config{})
	c.eqn2Armed = true // as after a handover mmWave → sub-6 (TestEqn2Arming)
	c.OnEvent(at(0), slotEv(0, 0))
	var h Flow
	c.Attach(at(0), &h)
	c.OnPacket(at(0), &h, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: 1})
	c.OnPacket(at(50), &h, &Packet{Dir: Downlink, Flags: FlagACK, PayloadLen: 10000, HasTS: true, TSecr: 1})
	c.OnPacket(at(50), &h, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: 2})
	check(t, "one RTT sample is not enough", c.OnPacket(at(60), &h, upTS), pass)
	c.OnPacket(at(150), &h, &Packet{Dir: Downlink, Flags: FlagACK, Seq: 10000, PayloadLen: 10000, HasTS: true, TSecr: 2})
	// The laptop has acknowledged all 20000 B (an ACK at 0 would keep
	// the edge the sender held, Controller.clamp).
	check(t, "eqn 2 with queueing", c.OnPacket(at(151), &h, &Packet{Dir: Uplink, Flags: FlagACK, Ack: 20000, Window: 65535, WScale: 7, HasTS: true, TSval: 3}), rewrite(79, ReasonStableRate))

	// Sub-millisecond RTTs (a LAN, or the phone's own scheduling noise)
	// are read as the 5 ms floor: RTT_min 50 µs and RTT 500 µs would
	// otherwise give rwnd = 2·c_est/10, a fifth of what was delivered,
	// and the window would collapse to 2 MSS. With the floor the ratio is
	// 1: rwnd = 2·c_est. The interval opened at 50 µs closes at 550 µs
	// with its first 10000 B: 2e7 B/s; srtt = 50 µs + (500-50)/8 µs =
	// 106.25 µs; c_est = 2125 B; rwnd = 4250 B → raw ceil(4250/128) = 34.
	c = New(Config{})
	c.eqn2Armed = true // as after a handover mmWave → sub-6 (TestEqn2Arming)
	c.OnEvent(at(0), slotEv(0, 0))
	var lan Flow
	c.Attach(at(0), &lan)
	us := func(v int) time.Time { return at(0).Add(time.Duration(v) * time.Microsecond) }
	c.OnPacket(us(0), &lan, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: 1})
	c.OnPacket(us(50), &lan, &Packet{Dir: Downlink, Flags: FlagACK, PayloadLen: 10000, HasTS: true, TSecr: 1})
	c.OnPacket(us(50), &lan, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: 2})
	c.OnPacket(us(550), &lan, &Packet{Dir: Downlink, Flags: FlagACK, Seq: 10000, PayloadLen: 10000, HasTS: true, TSecr: 2})
	if h := c.Hint(); h.CEst != 2e7 || lanSRTT(&lan) != 106250*time.Nanosecond {
		t.Fatalf("c_est %v srtt %v, want 2e7 B/s and 106.25µs", h.CEst, lanSRTT(&lan))
	}
	lanACK := &Packet{Dir: Uplink, Flags: FlagACK, Ack: 20000, Window: 65535, WScale: 7, HasTS: true, TSval: 3}
	check(t, "eqn 2 on a sub-ms path uses the floor", c.OnPacket(us(551), &lan, lanACK), rewrite(34, ReasonStableRate))
	// Without the floor: 2·2125·50/106.25 = 2000 B, below two segments:
	// the window would sit at 2 MSS (ceil(2920/128) = 23).
	// (The edge the first verdict gave is forgotten: it would hold the
	// window at 34, Controller.clamp.)
	c.cfg.RTTFloor = time.Nanosecond
	lan.hasEdge = false
	check(t, "without the floor it collapses to 2 MSS", c.OnPacket(us(552), &lan, lanACK), rewrite(23, ReasonStableRate))

	// Switched off.
	c = New(Config{StableRate: ToggleOff})
	c.eqn2Armed = true // as after a handover mmWave → sub-6 (TestEqn2Arming)
	c.OnEvent(at(0), slotEv(0, 0))
	var k Flow
	c.Attach(at(0), &k)
	tsFlow(c, &k)
	check(t, "StableRate off", c.OnPacket(at(101), &k, upTS), pass)

	// Two active flows share the rate: 20000/2 → ceil(10000/128) = 79.
	c = New(Config{})
	c.eqn2Armed = true // as after a handover mmWave → sub-6 (TestEqn2Arming)
	c.OnEvent(at(0), slotEv(0, 0))
	var m, other Flow
	c.Attach(at(0), &m)
	c.Attach(at(0), &other)
	c.OnPacket(at(0), &other, down(0, 1)) // other is active
	tsFlow(c, &m)
	// The estimator's interval opened at t=0 with other's 1 B and closed
	// at t=50 (the first RTT known); t=100 closes 10000 B / 0.05 s as before.
	// The ACK covers the 20000 B delivered (at ACK 0 the edge tsFlow's
	// ACKs gave, 0 + 10000 in flight + 2 segments, would hold the window).
	upTS.Ack = 20000
	check(t, "two flows", c.OnPacket(at(101), &m, upTS), rewrite(79, ReasonStableRate))
}

// RTT matching: one sample per TSval; repeated ACKs keep the first send
// time; a dropped ACK's TSval is not recorded.
func TestRTTMatching(t *testing.T) {
	c := New(Config{})
	c.OnEvent(at(0), slotEv(0, 0))
	var f Flow
	c.Attach(at(0), &f)
	up := func(ms int, v uint32) {
		c.OnPacket(at(ms), &f, &Packet{Dir: Uplink, Flags: FlagACK, Window: 100, WScale: 0, HasTS: true, TSval: v})
	}
	dn := func(ms int, ecr uint32) {
		c.OnPacket(at(ms), &f, &Packet{Dir: Downlink, Flags: FlagACK, PayloadLen: 100, HasTS: true, TSecr: ecr})
	}
	up(0, 5)
	up(10, 5) // same TSval: the send time stays 0
	dn(40, 5)
	if s, _, n := f.RTT(); s != 40*time.Millisecond || n != 1 {
		t.Fatalf("rtt %v n %d", s, n)
	}
	dn(60, 5) // second echo: no sample
	dn(61, 77)
	if _, _, n := f.RTT(); n != 1 {
		t.Fatalf("samples %d", n)
	}
	// Once the RTT is known (srtt 40 ms), a new TSval is recorded at most
	// every srtt/4 = 10 ms while the last one awaits its echo, so the ring
	// spans two RTTs: of one new TSval per ms at 100..139 only 100, 110,
	// 120 and 130 are kept, and the echo of 100 still matches at 200.
	for i := range 40 {
		up(100+i, uint32(100+i))
	}
	dn(199, 105) // never recorded
	if _, _, n := f.RTT(); n != 1 {
		t.Fatalf("samples after an unrecorded echo %d", n)
	}
	dn(200, 100) // 100 ms
	// srtt = 40 + (100-40)/8 = 47.5 ms; RTT_min stays 40 ms.
	if s, m, n := f.RTT(); n != 2 || m != 40*time.Millisecond || s != 47500*time.Microsecond {
		t.Fatalf("srtt %v min %v samples %d", s, m, n)
	}
	dn(201, 130) // sent at 130: 71 ms
	if _, _, n := f.RTT(); n != 3 {
		t.Fatalf("samples %d, want 3 (the echo of 130)", n)
	}

	// During Smoothing a dropped ACK's TSval is not recorded.
	fx := newFixture(t, nil)
	g := attach(fx, 0)
	toSmoothing(fx, g, 1000, 1000)
	fx.pkt(131, g, &Packet{Dir: Uplink, Flags: FlagACK, Ack: 1500, WScale: 7, HasTS: true, TSval: 42})
	fx.pkt(140, g, &Packet{Dir: Downlink, Flags: FlagACK, Seq: 2000, HasTS: true, TSecr: 42})
	if _, _, n := g.RTT(); n != 0 {
		t.Fatalf("sample from a dropped ACK")
	}
}

// Signal loss: no event for SignalLoss → Stable, pass-through; the next
// event restores.
func TestSignalLossAndRestore(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, a3(sub6, "A"))
	check(t, "clamp", fx.pkt(1, f, upACK(1, 65535, 7)), rewrite(782, ReasonPreparation))
	fx.ev(100, command(signaling.HOIntraNR, sub6, "A"))
	fx.c.cfg.ExecutionBound = time.Hour // let signal loss fire first
	check(t, "before loss", fx.pkt(5099, f, upACK(1, 65535, 7)), rewrite(782, ReasonPreparation))
	check(t, "at loss", fx.pkt(5100, f, upACK(1, 65535, 7)), pass)
	fx.want(Stable)
	if fx.obs.lost != 1 || !fx.c.Hint().PassThrough || fx.obs.last() != "preparation>stable:signal lost" {
		t.Fatalf("lost %d hint %+v last %q", fx.obs.lost, fx.c.Hint(), fx.obs.last())
	}
	fx.c.Tick(at(20000))
	if fx.obs.lost != 1 {
		t.Fatal("signal loss reported twice")
	}
	fx.ev(20001, a3(sub6, "B"))
	if fx.obs.restored != 1 || fx.c.Hint().PassThrough {
		t.Fatalf("restored %d hint %+v", fx.obs.restored, fx.c.Hint())
	}
	fx.want(Preparation)
	// Past the edge the first clamp gave (1 + 782·128).
	check(t, "clamp again", fx.pkt(20002, f, upACK(100001, 65535, 7)), rewrite(469, ReasonPreparation))

	// In pass-through a Smoothing drop would have been a pass, too.
	fx = newFixture(t, nil)
	g := attach(fx, 0)
	toSmoothing(fx, g, 1000, 1000)
	fx.c.cfg.SmoothingBound = time.Hour
	check(t, "dropping", fx.pkt(131, g, upACK(1500, 65535, 7)), drop)
	check(t, "lost", fx.pkt(5130, g, upACK(1500, 65535, 7)), pass)
}

// Bursts feed the database (on mmWave too) and mark it dirty.
func TestBurstsFeedDatabase(t *testing.T) {
	db := testDB()
	c := New(Config{SMaxDB: db})
	serving := func(tp signaling.CellType, id string, ms int, rb float64, b int) {
		c.OnEvent(at(ms), &signaling.Event{Kind: signaling.KindMACSlot, RBRatio: rb, Bytes: b, Serving: signaling.Cell{ID: id, Type: tp}})
	}
	// ŝ_b = S − arrival·D (burst.backlog). The history starts with the
	// first slot seen (t=0); the burst 10..12 ms serves S = 4100 B in
	// D = 2 ms; the delivery rate over the RTT (12 ms) ending with it,
	// 4100 B / 12 ms, stands for the arrivals (no c_est yet):
	// 4100 − 4100·2/12 = 3416.67 → 3416.
	c.lastRTT = 12 * time.Millisecond
	serving(sub6, "A", 0, 0, 0)
	serving(sub6, "A", 10, 0.95, 4000)
	serving(sub6, "A", 11, 0.3, 100)
	serving(sub6, "A", 12, 0, 0)
	if v, _ := db.Get(cell(sub6, "A")); v != 3416 || !c.Dirty() {
		t.Fatalf("ŝ_max(A) %d dirty %v", v, c.Dirty())
	}
	// A smaller burst does not lower it (the window 4..15 ms holds 4201
	// B: 101 − 4201·2/12 < 0); a larger one raises it: 9001 B in 2 ms,
	// alone in its window 21..32 ms, 9001 − 9001·2/12 = 7500.8 → 7500.
	serving(sub6, "A", 13, 0.95, 100)
	serving(sub6, "A", 14, 0.1, 1)
	serving(sub6, "A", 15, 0, 0)
	if v, _ := db.Get(cell(sub6, "A")); v != 3416 {
		t.Fatalf("ŝ_max(A) %d after a small burst", v)
	}
	serving(sub6, "A", 30, 0.95, 9000)
	serving(sub6, "A", 31, 0.1, 1)
	serving(sub6, "A", 32, 0, 0)
	if v, _ := db.Get(cell(sub6, "A")); v != 7500 {
		t.Fatalf("ŝ_max(A) %d", v)
	}
	// A change of cell mid-burst drops the burst.
	serving(sub6, "A", 40, 0.95, 50000)
	serving(sub6, "B", 41, 0.1, 1)
	serving(sub6, "B", 42, 0, 0)
	if _, ok := db.Get(cell(sub6, "B")); ok {
		t.Fatal("burst spanning two cells recorded")
	}
	// mmWave bursts are recorded with the same correction (§4.3 gave
	// them up; S − arrival·D bounds the backlog either way): the history
	// starts over with the new cell at 45 ms, so the window ending at 52
	// ms is its 8 ms, 50001 B: 50001 − 50001·2/8 = 37500.75 → 37500.
	serving(mmw, "M", 45, 0, 0)
	serving(mmw, "M", 50, 0.95, 50000)
	serving(mmw, "M", 51, 0.1, 1)
	serving(mmw, "M", 52, 0, 0)
	if v, _ := db.Get(cell(mmw, "M")); v != 37500 || db.Len() != 2 {
		t.Fatalf("ŝ_max(M) %d, cells %d", v, db.Len())
	}
}

// OnPacket allocates nothing, in every state and in pass-through.
func TestOnPacketAllocs(t *testing.T) {
	states := []struct {
		name  string
		setup func(fx *fixture, f *Flow)
		want  State
	}{
		{"pass-through", func(*fixture, *Flow) {}, Stable},
		{"stable with Eqn 2", func(fx *fixture, f *Flow) { fx.ev(0, slotEv(0, 0)); tsFlow(fx.c, f) }, Stable},
		{"stable in a sub-6 dwell, envelope bound", func(fx *fixture, f *Flow) {
			fx.ev(0, slotEv(0, 0))
			fx.c.eqn2Armed, fx.c.stableCap = true, 20000 // as after a handover mmWave → sub-6
			tsFlow(fx.c, f)
		}, Stable},
		{"preparation", func(fx *fixture, f *Flow) { fx.ev(0, command(signaling.HOIntraNR, sub6, "A")) }, Preparation},
		{"smoothing", func(fx *fixture, f *Flow) {
			fx.c.cfg.SmoothingBound = time.Hour
			toSmoothing(fx, f, 1000, 1000)
		}, Smoothing},
		{"stable in the ramp after a return to mmWave", func(fx *fixture, f *Flow) {
			fx.c.eqn2Armed = true // as after a handover mmWave → sub-6
			fx.ev(0, command(signaling.HOIntraNR, mmw, "M"))
			fx.ev(30, raEv(signaling.RASuccess, signaling.RAHandover))
			fx.c.Tick(at(190))
			tsFlow(fx.c, f)
		}, Stable},
	}
	for _, st := range states {
		fx := newFixture(t, func(c *Config) { c.Observer = NopObserver{}; c.SignalLoss = time.Hour; c.ExecutionBound = time.Hour })
		f := attach(fx, 0)
		st.setup(fx, f)
		fx.want(st.want)
		up := &Packet{Dir: Uplink, Flags: FlagACK, Ack: 1500, Window: 65535, WScale: 7, HasTS: true, TSval: 1}
		dn := &Packet{Dir: Downlink, Flags: FlagACK, Seq: 1 << 20, PayloadLen: 1400, HasTS: true, TSecr: 1}
		ms := 200
		n := testing.AllocsPerRun(1000, func() {
			ms++
			up.TSval++
			dn.TSecr = up.TSval
			dn.Seq += 1400 // new data: the ramp holds
			fx.c.OnPacket(at(ms), f, up)
			fx.c.OnPacket(at(ms), f, dn)
		})
		if n != 0 {
			t.Fatalf("%s: %v allocs per OnPacket pair", st.name, n)
		}
		if _, ok := fx.c.env.low(at(ms)); fx.c.eqn2Armed && !ok {
			t.Fatalf("%s: the envelope has no rate: its path was not run", st.name)
		}
		fx.want(st.want)
		if fx.c.ramp && f.rampFree == fx.c.rampGen {
			t.Fatalf("%s: the ramp let go of a flow that never retransmitted", st.name)
		}
	}
}

func BenchmarkOnPacket(b *testing.B) {
	c := New(Config{SignalLoss: time.Hour})
	c.eqn2Armed = true
	c.OnEvent(at(0), slotEv(0, 0))
	var f Flow
	c.Attach(at(0), &f)
	tsFlow(c, &f)
	up := &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true}
	dn := &Packet{Dir: Downlink, Flags: FlagACK, PayloadLen: 1400, HasTS: true}
	now := at(200)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(10 * time.Microsecond)
		up.TSval = uint32(i)
		dn.TSecr, dn.Seq = uint32(i), uint32(i*1400)
		c.OnPacket(now, &f, up)
		c.OnPacket(now, &f, dn)
	}
}

// Finding 2 happens at the command: the flush makes the laptop send
// duplicate ACKs before random access. From the command, pure ACKs that do
// not cover everything the flow was sent are dropped, within the bound;
// anything with data, SYN, FIN or RST, and ACKs covering all, pass.
func TestSuppressionFromCommand(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, a3(sub6, "A"))
	fx.pkt(50, f, down(1000, 1000))                     // high 2000
	fx.pkt(60, f, upACK(2000, 65535, 7))                // the laptop has it all
	fx.ev(100, command(signaling.HOIntraNR, sub6, "A")) // flush: 3000..4000 delivered, 2000..3000 a hole
	fx.pkt(101, f, down(3000, 1000))                    // high 4000
	tests := []struct {
		name string
		ms   int
		p    *Packet
		want Verdict
	}{
		{"dup ACK at the hole", 102, upACK(2000, 65535, 7), drop},
		{"dup ACK again", 103, upACK(2000, 65535, 7), drop},
		{"data with the ACK", 104, &Packet{Dir: Uplink, Flags: FlagACK | FlagPSH, Ack: 2000, PayloadLen: 10, Window: 100, WScale: 7}, pass},
		{"FIN", 105, &Packet{Dir: Uplink, Flags: FlagFIN | FlagACK, Ack: 2000, Window: 100, WScale: 7}, pass},
		{"ACK covering all: clamped, not dropped", 106, upACK(4000, 65535, 7), rewrite(782, ReasonPreparation)},
	}
	for _, tc := range tests {
		check(t, tc.name, fx.pkt(tc.ms, f, tc.p), tc.want)
	}
	fx.want(Preparation)
	// Past the bound (150 ms after the command) nothing is dropped, even
	// though random access has not come.
	// (An ACK below the last one keeps its edge 4000 + 782·128:
	// ceil(102096/128) = 798.)
	check(t, "after the bound", fx.pkt(250, f, upACK(2000, 65535, 7)), rewrite(798, ReasonPreparation))
	// Random access after the bound: Smoothing would be over at once.
	fx.ev(260, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(261))
	fx.want(Stable)
}

func lanSRTT(f *Flow) time.Duration { s, _, _ := f.RTT(); return s }

// Eqn 2 is armed by a handover mmWave → sub-6 and disarmed by one into
// mmWave (§4.5: keep the mmWave-sized window on sub-6, release it on the
// way back), where the ramp holds each flow until its sender
// retransmits. Armed, it clamps to the target's ŝ_max until c_est has a
// sample in the new cell.
func TestEqn2Arming(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	tsFlow(fx.c, f)
	up := func(ms int) Verdict {
		return fx.pkt(ms, f, &Packet{Dir: Uplink, Flags: FlagACK, Ack: 1 << 30, Window: 65535, WScale: 7, HasTS: true, TSval: 77})
	}
	check(t, "not armed at start: no Eqn 2", up(101), pass)
	// A horizontal sub-6 handover does not arm it.
	fx.ev(200, command(signaling.HOIntraNR, sub6, "A"))
	fx.ev(260, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(400))
	fx.want(Stable)
	check(t, "after sub-6 → sub-6", up(401), pass)
	// Onto mmWave, then back down to sub-6 B: armed.
	g := attach(fx, 900) // a second flow, from before the ramp
	fx.ev(1000, command(signaling.HOIntraNR, mmw, "M1"))
	fx.ev(1060, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(1200))
	check(t, "on mmWave", up(1201), pass)
	fx.ev(2000, command(signaling.HOIntraNR, sub6, "B"))
	fx.ev(2060, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(2200))
	fx.want(Stable)
	// c_est was reset at random access: hold to ŝ_max(B) = 60000 B,
	// raw ceil(60000/128) = 469.
	check(t, "armed, no rate yet: target's buffer", up(2201), rewrite(469, ReasonStableRate))
	// Back to mmWave: the ramp, with M2's ŝ_max (unknown: the minimum
	// sub-6 value, B's), and no rate yet.
	fx.ev(3000, command(signaling.HOIntraNR, mmw, "M2"))
	fx.ev(3060, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(3200))
	fx.want(Stable)
	check(t, "back on mmWave: ramp", up(3201), rewrite(469, ReasonStableRate))
	// New data does not let go, nor does a late segment (below the
	// highest seen, sent before it: link-layer reordering); a
	// retransmission (below the highest seen, sent after it) does, for
	// this flow only.
	fx.ev(3210, command(signaling.HOIntraNR, mmw, "M3"))
	fx.ev(3270, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(3420))
	fx.want(Stable)
	check(t, "mmWave → mmWave keeps the ramp", up(3421), rewrite(469, ReasonStableRate))
	tsd := func(seq uint32, tsv uint32) *Packet { p := down(seq, 1000); p.HasTS, p.TSval = true, tsv; return p }
	fx.pkt(3422, f, tsd(1<<20, 10))
	check(t, "new data: held", up(3423), rewrite(469, ReasonStableRate))
	fx.pkt(3423, f, tsd(1<<20-1000, 9))
	check(t, "a late segment: held", up(3423), rewrite(469, ReasonStableRate))
	fx.pkt(3424, f, tsd(1<<19, 11))
	// A retransmission makes the epoch fresh; the flow is let go once it
	// also leaves the window unused (TestReturnToMmWaveLetsGoAfterLoss,
	// TestReturnToMmWaveFreshEpochHeld), which this flow has not shown.
	check(t, "after a retransmission, the window used: held", up(3425), rewrite(469, ReasonStableRate))
	if f.rampFresh != fx.c.rampGen {
		t.Errorf("the retransmission did not mark the epoch fresh")
	}
	f.unused, f.unusedOK = 100000, true // its sender left 100 KB of the window unused
	check(t, "fresh epoch, window unused: let go", up(3425), pass)
	gUp := &Packet{Dir: Uplink, Flags: FlagACK, Ack: 1 << 30, Window: 65535, WScale: 7, HasTS: true, TSval: 78}
	// (shared with f, which is active: 30000 B, raw 235)
	check(t, "the other flow: still held", fx.pkt(3426, g, gUp), rewrite(235, ReasonStableRate))
	// Down to sub-6 and back up: a new ramp holds f again.
	fx.ev(4000, command(signaling.HOIntraNR, sub6, "B"))
	fx.ev(4060, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.ev(5000, command(signaling.HOIntraNR, mmw, "M2"))
	fx.ev(5060, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(5200))
	check(t, "next return: held again", up(5201), rewrite(469, ReasonStableRate))
}

// MmWaveHorizontalClamp off: a handover from mmWave to mmWave, predicted
// (A3 between mmWave cells) or commanded, clamps nothing and through its
// Smoothing the window passes; every other type still clamps (mmWave →
// sub-6 on A2, sub-6 → mmWave on B1), and so does the default.
func TestMmWaveHorizontalUnclamped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		toggle Toggle
		want   Verdict
	}{
		{"default", ToggleDefault, rewrite(469, ReasonPreparation)}, // least sub-6: B, 60000 B
		{"off", ToggleOff, pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, func(c *Config) { c.MmWaveHorizontalClamp = tc.toggle })
			f := attach(fx, 0)
			fx.ev(0, slotEv(0, 0))
			fx.ev(10, a3(mmw, "M2"))
			fx.want(Preparation)
			check(t, "predicted mmWave → mmWave", fx.pkt(11, f, upACK(1, 65535, 7)), tc.want)
			if h := fx.c.Hint(); (h.SMax == 0) != (tc.want == pass) {
				t.Fatalf("hint budget %d with verdict %+v", h.SMax, tc.want)
			}
			fx.ev(40, command(signaling.HOIntraNR, mmw, "M2"))
			check(t, "commanded", fx.pkt(41, f, upACK(1, 65535, 7)), tc.want)
			fx.ev(70, raEv(signaling.RASuccess, signaling.RAHandover))
			fx.want(Smoothing)
			check(t, "smoothing", fx.pkt(71, f, upACK(1, 65535, 7)), tc.want)
			if v, _ := fx.db.Lookup(cell(mmw, "M2")); fx.c.stableCap != v {
				t.Fatalf("stableCap %d after random access, want the target's ŝ_max %d", fx.c.stableCap, v)
			}
			// Serving M2 (mmWave): an A2 predicts mmWave → sub-6, which
			// clamps either way.
			fx.ev(1000, report(signaling.MeasA2, mmw, unk, ""))
			fx.want(Preparation)
			if v := fx.pkt(1001, f, upACK(1, 65535, 7)); v.Action != Rewrite {
				t.Fatalf("mmWave → sub-6 predicted: verdict %+v, want a clamp", v)
			}
		})
	}
}

// AnchorKeepsCell (the default): with the data on mmWave cell M, an LTE
// A3 (the anchor's stream) clamps to M's own ŝ_max, the buffer the data
// stays in, not Lookup's fallback for an unknown mmWave cell (the least
// sub-6 value); the LTE report does not make the anchor the data cell;
// the anchor's command naming M keeps that clamp until random access,
// which ends it without a handover of the data path (no episode, no
// Smoothing, c_est kept). Off: the fallback clamp and a handover to M.
func TestAnchorKeepsDataCell(t *testing.T) {
	for _, tc := range []struct {
		name    string
		toggle  Toggle
		clamp   Verdict
		episode int
	}{
		{"default", ToggleDefault, rewrite(11719, ReasonPreparation), 0}, // ceil(1.5 MB / 128)
		{"off", ToggleOff, rewrite(469, ReasonPreparation), 1},           // B, 60000 B
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, func(c *Config) { c.AnchorKeepsCell = tc.toggle })
			M := cell(mmw, "M")
			fx.db.Observe(M, 1_500_000)
			f := attach(fx, 0)
			fx.ev(0, command(signaling.HOSNAddition, mmw, "M"))
			fx.ev(30, raEv(signaling.RASuccess, signaling.RAHandover))
			fx.ev(40, &signaling.Event{Kind: signaling.KindMACSlot, Serving: M})
			fx.ev(500, &signaling.Event{Kind: signaling.KindMACSlot, Serving: M}) // Smoothing ended at its bound
			fx.want(Stable)
			ep := fx.c.episode
			fx.ev(1000, report(signaling.MeasA3, lte, lte, ""))
			fx.want(Preparation)
			if tc.toggle == ToggleDefault && fx.c.serving != M {
				t.Fatalf("serving %+v after an LTE report, want the data cell M", fx.c.serving)
			}
			check(t, "anchor predicted", fx.pkt(1001, f, upACK(1, 65535, 7)), tc.clamp)
			fx.ev(1100, &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOLTEAnchor, Target: M})
			fx.want(Preparation)
			if v := fx.pkt(1101, f, upACK(1, 65535, 7)); v.Reason != ReasonPreparation || v.Window < tc.clamp.Window {
				t.Fatalf("anchor commanded: verdict %+v, want a clamp at least %d", v, tc.clamp.Window)
			}
			fx.ev(1133, raEv(signaling.RASuccess, signaling.RAHandover))
			if got := int(fx.c.episode - ep); got != tc.episode {
				t.Fatalf("episodes after the anchor handover: +%d, want +%d", got, tc.episode)
			}
			if tc.toggle == ToggleDefault {
				fx.want(Stable)
				// The held window opens gradually (release), not clamped.
				if v := fx.pkt(1134, f, upACK(1, 65535, 7)); v.Reason != ReasonRelease {
					t.Fatalf("after the anchor handover: verdict %+v, want the release", v)
				}
			} else {
				fx.want(Smoothing)
			}
		})
	}
}

// Config.MmWaveA2Hold: by default an A2 on the mmWave data cell keeps the
// clamp to the sub-6 target's ŝ_max until the handover down to sub-6
// (here 1.5 s later, as on the February 2023 drives), so the mmWave
// cell's queue drains before the command forwards it; off, the A2's
// prediction times out at its kind's deadline and the flows go back to
// Stable a second before the command.
func TestMmWaveA2HoldKeepsTheClamp(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold time.Duration
		at   State // 1.4 s after the A2
	}{{"default", 0, Preparation}, {"off", -1, Stable}} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, func(c *Config) { c.MmWaveA2Hold = tc.hold })
			f := attach(fx, 0)
			fx.ev(0, command(signaling.HOSNAddition, mmw, "M"))
			fx.ev(30, raEv(signaling.RASuccess, signaling.RAHandover))
			fx.ev(40, &signaling.Event{Kind: signaling.KindMACSlot, Serving: cell(mmw, "M")})
			fx.ev(500, &signaling.Event{Kind: signaling.KindMACSlot, Serving: cell(mmw, "M")}) // Smoothing ended at its bound
			fx.want(Stable)
			fx.ev(1000, report(signaling.MeasA2, mmw, unk, ""))
			fx.want(Preparation)
			clamp := fx.pkt(1001, f, upACK(1, 65535, 7))
			if clamp.Action != Rewrite || clamp.Reason != ReasonPreparation {
				t.Fatalf("A2 on mmWave: verdict %+v, want the clamp", clamp)
			}
			fx.c.Tick(at(2400))
			fx.want(tc.at)
			v := fx.pkt(2401, f, upACK(1, 65535, 7))
			if (v == clamp) != (tc.at == Preparation) {
				t.Fatalf("1.4 s after the A2 (%v): verdict %+v, the clamp was %+v", tc.at, v, clamp)
			}
		})
	}
}
