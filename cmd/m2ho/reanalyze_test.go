package main

import (
	"slices"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench"
)

// --reanalyze with --seeds rereads the bench as it ran: one repetition per
// seed, the first the bench's seed (before, Repeat stayed at --repeat's 1
// and a three-seed bench reread as invalid, "3 runs, want 1").
func TestReanalyzeMetaSeeds(t *testing.T) {
	cfg := bench.Config{Scale: 1, Repeat: 1, Seeds: []uint64{4, 5, 6}}
	m := reanalyzeMeta(cfg, "measured", 60*time.Second, nil)
	if m.Repeat != 3 || m.Seed != 4 || !slices.Equal(m.Seeds, []uint64{4, 5, 6}) || m.DurationS != 60 || m.Scenario != "measured" {
		t.Errorf("with --seeds 4,5,6: %+v", m)
	}
	cfg = bench.Config{Scale: 1, Repeat: 2, Seed: 7}
	if m := reanalyzeMeta(cfg, "x", time.Second, nil); m.Repeat != 2 || m.Seed != 7 || m.Seeds != nil {
		t.Errorf("with --repeat 2 --seed 7: %+v", m)
	}
}
