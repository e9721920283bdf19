package m2ho

import (
	"slices"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/signaling"
)

// inferredHO is a handover the reader inferred from its trace (XCAL.md):
// onto LTE, from the NR cell src.
func inferredHO(ho signaling.HOKind, src signaling.Cell) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindHOCommand, HO: ho, Inferred: true,
		Serving: src, Target: signaling.Cell{Type: lte}}
}

func mmwA2() *signaling.Event {
	return &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA2, Serving: cell(mmw, "M")}
}

// An inferred SN release confirms the A2 prediction and leaves
// Preparation at once: the clamp does not wait out the 1 s execution bound
// for a random access that has passed. mmWave → LTE arms Eqn 2 with the
// LTE ŝ_max, and the new cell's c_est starts over (so Eqn 2 holds the flows
// to that ŝ_max until it has a rate).
func TestInferredReleaseEndsPreparation(t *testing.T) {
	for _, tc := range []struct {
		rules Rules
		clamp uint16
	}{
		// Streams predicts the release onto LTE: the smallest known LTE
		// ŝ_max, L's 200000 B → raw ceil(200000/128) = 1563.
		{Streams, 1563},
		// Algorithm 1 predicts a sub-6 target: B's 60000 B → 469.
		{Algorithm1, 469},
	} {
		t.Run(tc.rules.Name(), func(t *testing.T) {
			fx := newFixture(t, func(c *Config) { c.Rules = tc.rules })
			f := attach(fx, 0)
			fx.ev(0, &signaling.Event{Kind: signaling.KindMACSlot, Serving: cell(mmw, "M")})
			fx.ev(10, mmwA2())
			fx.want(Preparation)
			check(t, "clamp", fx.pkt(11, f, upACK(1, 65535, 7)), rewrite(tc.clamp, ReasonPreparation))

			fx.ev(160, inferredHO(signaling.HOSNRelease, cell(mmw, "M")))
			fx.want(Stable)
			if got := fx.obs.last(); got != "preparation>stable:inferred handover: executed already" {
				t.Fatalf("transition %q", got)
			}
			o := fx.obs.preds[len(fx.obs.preds)-1]
			if o.Kind != OutcomeConfirmed || !o.Inferred || o.Actual != signaling.HOMmWaveToSub6 || o.Lead != 150e6 {
				t.Fatalf("outcome %+v", o)
			}
			if h := fx.c.Hint(); h.SMax != 0 || h.Serving.Type != lte || h.Target != (signaling.Cell{}) {
				t.Fatalf("hint %+v", h)
			}
			// Eqn 2 armed, no rate in the new cell yet: the LTE ŝ_max
			// again, but as Stable's rate control, not the clamp.
			check(t, "after", fx.pkt(170, f, upACK(1, 65535, 7)), rewrite(1563, ReasonStableRate))
			// Past the execution bound nothing else happens.
			n := len(fx.obs.trans)
			fx.c.Tick(at(1500))
			fx.want(Stable)
			if len(fx.obs.trans) != n {
				t.Fatalf("transitions after the bound: %v", fx.obs.trans[n:])
			}
		})
	}
}

// An inferred handover nobody predicted changes no state: no clamp for
// what has already happened. Horizontal (sub-6 → LTE) leaves Eqn 2 off.
func TestInferredUnpredictedStaysStable(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.ev(0, &signaling.Event{Kind: signaling.KindMACSlot, Serving: cell(sub6, "A")})
	fx.ev(50, inferredHO(signaling.HOLTEAnchor, cell(sub6, "A")))
	fx.want(Stable)
	if len(fx.obs.trans) != 0 {
		t.Fatalf("transitions %v", fx.obs.trans)
	}
	if o := fx.obs.preds[len(fx.obs.preds)-1]; o.Kind != OutcomeUnpredicted || !o.Inferred {
		t.Fatalf("outcome %+v", o)
	}
	check(t, "after", fx.pkt(60, f, upACK(1, 65535, 7)), pass)
	if fx.c.eqn2Armed {
		t.Fatal("Eqn 2 armed by a horizontal handover")
	}
}

// An inferred release during a logged handover's Smoothing ends it: the
// release came after it (the UE read system information after both), so
// the logged handover's holes are history and Preparation would wait for
// a random access that is not coming. No ACK is dropped after it.
func TestInferredDuringSmoothing(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	fx.pkt(0, f, down(1000, 1000)) // downlink data at the command
	fx.pkt(0, f, upACK(1000, 65535, 7))
	fx.ev(0, &signaling.Event{Kind: signaling.KindMACSlot, Serving: cell(mmw, "M")})
	fx.ev(10, command(signaling.HOSNChange, mmw, "M2"))
	fx.ev(40, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.want(Smoothing)
	check(t, "dup ACK in smoothing", fx.pkt(41, f, upACK(1000, 65535, 7)), drop)
	n := len(fx.obs.trans)
	fx.ev(60, inferredHO(signaling.HOSNRelease, cell(mmw, "M2")))
	fx.want(Stable)
	if !strings.HasPrefix(fx.obs.last(), "smoothing>stable:inferred handover") {
		t.Fatalf("transition %q", fx.obs.last())
	}
	v := fx.pkt(61, f, upACK(1000, 65535, 7))
	if v.Action == Drop || v.Reason == ReasonPreparation {
		t.Fatalf("after the inferred release: %+v", v)
	}
	if !fx.c.eqn2Armed {
		t.Fatal("Eqn 2 not armed by mmWave → LTE")
	}
	if slices.ContainsFunc(fx.obs.trans[n:], func(s string) bool { return strings.Contains(s, ">preparation") }) {
		t.Fatalf("entered Preparation: %v", fx.obs.trans[n:])
	}
}

// The default rule set is Streams; Algorithm 1 and the A3-only baseline
// are chosen by name.
func TestDefaultRulesStreams(t *testing.T) {
	if got := New(Config{}).Predictor().Rules(); got.Name() != "streams" {
		t.Fatalf("default rules %q", got.Name())
	}
	for _, name := range []string{"streams", "alg1", "a3-only"} {
		r, ok := RulesByName(name)
		if !ok || New(Config{Rules: r}).Predictor().Rules().Name() != name {
			t.Fatalf("rules %q: %v %v", name, r, ok)
		}
	}
}
