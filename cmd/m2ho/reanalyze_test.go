package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// --reanalyze DIR takes the bench's settings from DIR/bench.json, flags
// given override each; an older bench's summary.json stands in for it;
// with neither, the flags alone; a malformed file is an error naming it.
func TestReanalyzeSettings(t *testing.T) {
	none := func(string) bool { return false }
	given := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	flagVariants, _ := bench.ParseVariants([]string{"pass", "m2ho", "x"}, []string{"x=--default-mode m2ho --lambda 3"})
	flags := bench.Config{Scenario: "steady", Scale: 1, Repeat: 1}

	dir := t.TempDir()
	st := bench.Settings{Scenario: filepath.Join(dir, "moved-away.yaml"), ScenarioName: "measured", XCAL: "drive.csv",
		DataDir: "/data", Scale: 0.5, Seed: 1, Seeds: []uint64{1, 2, 3}, DurationS: 162, Repeat: 3,
		Variants:    []bench.Variant{{Name: "pass", Args: []string{"--default-mode", "pass"}}, {Name: "m2ho", Args: []string{"--default-mode", "m2ho"}}},
		CommandLine: "m2ho bench ..."}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, bench.SettingsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var msg strings.Builder
	m, err := reanalyzeSettings(none, flags, flagVariants, dir, &msg)
	if err != nil {
		t.Fatal(err) // the scenario file is gone: not loaded
	}
	if m.Scenario != "measured" || m.Scale != 0.5 || m.Repeat != 3 || !slices.Equal(m.Seeds, []uint64{1, 2, 3}) || m.DurationS != 162 ||
		len(m.Variants) != 2 || m.Variants[1].Name != "m2ho" || m.DataDir != "/data" {
		t.Errorf("from bench.json: %+v", m)
	}
	if !strings.Contains(msg.String(), bench.SettingsFile) {
		t.Errorf("message %q does not name %s", msg.String(), bench.SettingsFile)
	}
	// Flags given win, one by one.
	cfg := flags
	cfg.Seeds, cfg.Scale, cfg.Duration = []uint64{9}, 1, 30*time.Second
	m, err = reanalyzeSettings(given("seeds", "variants", "duration", "scale"), cfg, flagVariants, dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Seeds, []uint64{9}) || m.Repeat != 1 || len(m.Variants) != 3 || m.DurationS != 30 || m.Scale != 1 || m.Scenario != "measured" {
		t.Errorf("flags over bench.json: %+v", m)
	}
	// A scenario flag loads that scenario for its name and duration.
	if m, err = reanalyzeSettings(given("scenario"), flags, flagVariants, dir, io.Discard); err != nil || m.Scenario != "steady" {
		t.Errorf("--scenario steady over bench.json: %+v, %v", m, err)
	}

	// An older bench: summary.json only.
	old := t.TempDir()
	sum := `{"scenario": "measured", "scale": 1, "seed": 4, "seeds": [4, 5], "duration_s": 60, "repeat": 2,
	  "variants": [{"name": "pass", "args": ["--default-mode", "pass"]}, {"name": "quic", "args": ["--default-mode", "quic"], "tunnel": true}],
	  "calibration": {"drive": {"xcal": "bw-1-ho.csv", "capacity": "udp.log"}}}`
	if err := os.WriteFile(filepath.Join(old, "summary.json"), []byte(sum), 0o644); err != nil {
		t.Fatal(err)
	}
	msg.Reset()
	if m, err = reanalyzeSettings(none, flags, flagVariants, old, &msg); err != nil {
		t.Fatal(err)
	}
	if m.Scenario != "measured" || m.Repeat != 2 || m.Seed != 4 || m.DurationS != 60 || len(m.Variants) != 2 || !m.Variants[1].Tunnel() || m.Variants[0].Tunnel() {
		t.Errorf("from summary.json: %+v", m)
	}
	if !strings.Contains(msg.String(), "summary.json") {
		t.Errorf("message %q does not name summary.json", msg.String())
	}
	if st, _ := bench.ReadSettings(old); st.XCAL != "bw-1-ho.csv" || st.Capacity != "udp.log" || !st.FromSummary {
		t.Errorf("summary.json's drive: %+v", st)
	}

	// Neither: the flags as given.
	if m, err = reanalyzeSettings(none, flags, flagVariants, t.TempDir(), io.Discard); err != nil || m.Scenario != "steady" || len(m.Variants) != 3 {
		t.Errorf("no settings: %+v, %v", m, err)
	}
	// Malformed.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, bench.SettingsFile), []byte("{\"scenario\": 3"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reanalyzeSettings(none, flags, flagVariants, bad, io.Discard); err == nil || !strings.Contains(err.Error(), filepath.Join(bad, bench.SettingsFile)) {
		t.Errorf("malformed bench.json: %v", err)
	}
}
