package main

import (
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"
)

// `m2ho emulate --seed N` draws the synthetic drive from N: the bench
// runs every variant of a repetition with that repetition's seed, so
// they share one drive, and repetitions differ.
func TestEmulateSeedDrawsTheDrive(t *testing.T) {
	load := func(seed uint64) []time.Duration {
		s, err := loadScenario(emulateFlags{scenario: "mixed-drive", scale: 0.3, seed: seed, duration: 60 * time.Second}, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		var at []time.Duration
		for _, h := range s.Config.Schedule.Handovers {
			at = append(at, h.At)
		}
		return at
	}
	a, b, c := load(2), load(2), load(3)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 2 twice: %v / %v", a, b)
	}
	if reflect.DeepEqual(a, c) {
		t.Fatalf("seeds 2 and 3 share the handover times %v", a)
	}
}
