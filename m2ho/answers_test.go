package m2ho

import (
	"fmt"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/signaling"
)

// rateOf is the learned counts of one kind from one data cell type.
func rateOf(t *testing.T, db *SMaxDB, r Reports, src signaling.CellType) AnswerCount {
	t.Helper()
	for _, c := range db.AnswerCounts() {
		if c.Report == r && c.Serving == src {
			return c
		}
	}
	return AnswerCount{Report: r, Serving: src}
}

// The predictor counts a stream answered when a handover of its kind comes
// while it is live, unanswered when it expires; a stream taken back by an
// A1, or ended by another kind of handover, is not counted.
func TestAnswerBookCounts(t *testing.T) {
	db := NewSMaxDB()
	p := NewPredictor(Streams, 0)
	p.SetAnswerBook(db)
	// An mmWave A2 that expires (its deadline: 500 ms at most from the
	// prior, far below the 3 s to the next event).
	p.OnEvent(at(0), mmwA2())
	p.Tick(at(3000))
	// One answered by an SN release while live.
	p.OnEvent(at(5000), mmwA2())
	p.OnEvent(at(5100), command(signaling.HOSNRelease, lte, ""))
	// Data on LTE now; an SN addition brings it back to mmWave.
	p.OnEvent(at(6000), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cell(mmw, "M")})
	// One taken back by an NR A1 on the same cell.
	p.OnEvent(at(8000), mmwA2())
	p.OnEvent(at(8100), &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA1, Serving: cell(mmw, "M")})
	// One ended by a handover of another kind (an SN change).
	p.OnEvent(at(10000), mmwA2())
	p.OnEvent(at(10100), command(signaling.HOSNChange, mmw, "M2"))

	got := rateOf(t, db, ReportsNRA2, mmw)
	if got.Answered != 1 || got.Unanswered != answerDecay {
		t.Fatalf("nr-a2 from mmWave: answered %v unanswered %v, want 1 and %v (one expiry, then one answer)", got.Answered, got.Unanswered, answerDecay)
	}
	if n := len(db.AnswerCounts()); n != 1 {
		t.Fatalf("%d kinds counted, want only nr-a2 from mmWave: %+v", n, db.AnswerCounts())
	}
	if !db.Dirty() {
		t.Fatal("learning did not mark the database for saving")
	}
}

// After four mmWave A2s in a row that the network left unanswered, the
// fifth clamps nothing until its command; the command clamps; one answer
// brings the clamp back. Off (AnswerRates), every prediction clamps.
func TestAnswerRatesUnclampRareKind(t *testing.T) {
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off"}[on]
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t, func(c *Config) {
				if !on {
					c.AnswerRates = ToggleOff
				}
			})
			// Each check takes a new flow: a flow clamped before is
			// released gradually (Controller.release), not at once.
			// Streams predicts the release onto LTE: L's 200000 B →
			// raw ceil(200000/128) = 1563.
			clamped := rewrite(1563, ReasonPreparation)
			ms := 0
			for i := range 4 {
				fx.ev(ms, mmwA2())
				fx.want(Preparation)
				check(t, "A2 before it was learned", fx.pkt(ms+1, attach(fx, ms), upACK(1, 65535, 7)), clamped)
				ms += 3000
				fx.c.Tick(at(ms))
				fx.want(Stable)
				if got := rateOf(t, fx.db, ReportsNRA2, mmw); got.Unanswered == 0 || got.Rare != (i == 3) {
					t.Fatalf("after %d expiries: %+v", i+1, got)
				}
			}
			fx.ev(ms, mmwA2())
			fx.want(Preparation)
			if on {
				check(t, "fifth A2", fx.pkt(ms+1, attach(fx, ms), upACK(1, 65535, 7)), pass)
				if h := fx.c.Hint(); h.SMax != 0 {
					t.Fatalf("hint ŝ_max %d for an unclamped prediction, want 0", h.SMax)
				}
				if !strings.Contains(fx.obs.last(), "rarely answered") {
					t.Fatalf("transition %q does not say why there is no clamp", fx.obs.last())
				}
			} else {
				check(t, "fifth A2, rule off", fx.pkt(ms+1, attach(fx, ms), upACK(1, 65535, 7)), clamped)
			}
			// The network answers this time: the command clamps.
			fx.ev(ms+100, command(signaling.HOSNRelease, lte, ""))
			check(t, "after the command", fx.pkt(ms+101, attach(fx, ms+100), upACK(1, 65535, 7)), clamped)
			fx.ev(ms+130, raEv(signaling.RASuccess, signaling.RAHandover))
			fx.c.Tick(at(ms + 2000))
			fx.want(Stable)
			fx.ev(ms+3000, &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cell(mmw, "M")})
			fx.ev(ms+3030, raEv(signaling.RASuccess, signaling.RAHandover))
			fx.c.Tick(at(ms + 5000))
			fx.want(Stable)
			if got := rateOf(t, fx.db, ReportsNRA2, mmw); got.Rare {
				t.Fatalf("one answer after four expiries still rare: %+v", got)
			}
			fx.ev(ms+6000, mmwA2())
			fx.want(Preparation)
			check(t, "A2 after an answer", fx.pkt(ms+6001, attach(fx, ms+6000), upACK(1, 65535, 7)), clamped)
		})
	}
}

// A prediction resting on a rare kind and on a kind that is answered
// clamps: only one that rests on rare kinds alone goes unclamped.
func TestAnswerRatesMixedEpisodeClamps(t *testing.T) {
	fx := newFixture(t, nil)
	for range 5 {
		fx.db.observeAnswer(answerRelease, mmw, false)
	}
	f := attach(fx, 0)
	fx.ev(0, mmwA2())
	check(t, "A2 alone", fx.pkt(1, f, upACK(1, 65535, 7)), pass)
	// An NR A3 to a sub-6 neighbour joins the episode: an SN change
	// to sub-6 cell A (100000 B → raw 782).
	fx.ev(50, &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA3, Serving: cell(mmw, "M"), Neighbor: cell(sub6, "A")})
	check(t, "A2 and A3", fx.pkt(51, f, upACK(1, 65535, 7)), rewrite(782, ReasonPreparation))
}

// The learned counts are kept in the database's file and read back; a bad
// entry is an error naming it; a file without them reads as before.
func TestAnswerCountsStored(t *testing.T) {
	db := NewSMaxDB()
	db.Observe(cell(sub6, "A"), 100000)
	for range 3 {
		db.observeAnswer(answerRelease, mmw, false)
	}
	db.observeAnswer(answerAddition, lte, true)
	b, err := db.Snapshot().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalSMaxDB(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	want, got := db.AnswerCounts(), back.AnswerCounts()
	if len(got) != 2 || len(want) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
	if back.Dirty() {
		t.Fatal("a database just read is dirty")
	}
	for _, tc := range []struct{ answers, want string }{
		{`[{"report":"nr-a4","serving":"mmwave","answered":0,"unanswered":1}]`, "answers[0].report"},
		{`[{"report":"nr-a2","serving":"nr","answered":0,"unanswered":1}]`, "answers[0].serving"},
		{`[{"report":"nr-a2","serving":"mmwave","answered":-1,"unanswered":1}]`, "answers[0].answered"},
		{`[{"report":"nr-a2","serving":"mmwave","answered":0,"unanswered":17}]`, "answers[0].unanswered"},
		{`[{"report":"nr-a2","serving":"mmwave","answered":0,"unanswered":0},{"report":"nr-a2","serving":"mmwave","answered":0,"unanswered":1}]`, "answers[1]: nr-a2 from mmwave is listed twice"},
	} {
		_, err := UnmarshalSMaxDB([]byte(`{"version":1,"cells":[],"answers":` + tc.answers + `}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.answers, err, tc.want)
		}
	}
	old, err := UnmarshalSMaxDB([]byte(`{"version":1,"cells":[{"id":"A","type":"sub6","smax_bytes":100000}]}`))
	if err != nil || len(old.AnswerCounts()) != 0 {
		t.Fatalf("a file without answers: %v, %+v", err, old.AnswerCounts())
	}
	b, _ = old.Snapshot().Marshal()
	if strings.Contains(string(b), "answers") {
		t.Fatalf("an empty table is written:\n%s", b)
	}
}

// An ignored prediction gives the flows Stable's verdicts: on the ramp back
// to mmWave (where §4.3's mmWave → mmWave exception keeps the clamp) the
// ramp's, not the clamp. Here the flow's sender has recovered, so the ramp
// has let it go and Stable passes its ACK; with the rule off the A2 clamps.
func TestAnswerRatesIgnoredKeepsStable(t *testing.T) {
	for _, on := range []bool{true, false} {
		fx := newFixture(t, func(c *Config) {
			if !on {
				c.AnswerRates = ToggleOff
			}
		})
		for range 5 {
			fx.db.observeAnswer(answerRelease, mmw, false)
		}
		fx.c.ramp, fx.c.rampGen = true, 1
		f := attach(fx, 0)
		f.rampFree = 1
		fx.ev(0, mmwA2())
		fx.want(Preparation)
		want := pass
		if !on {
			want = rewrite(1563, ReasonPreparation) // L's 200000 B
		}
		check(t, fmt.Sprintf("A2 on the ramp, rule on %v", on), fx.pkt(1, f, upACK(1, 65535, 7)), want)
	}
}
