package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Settings are what a bench ran with. Run writes them to OUT/bench.json
// before its first run, so that `m2ho bench --reanalyze OUT` rereads the
// bench as it ran without the user repeating every flag (a flag given
// then overrides its setting), also for a bench that was interrupted.
type Settings struct {
	// Scenario is the --scenario argument (a builtin name or a YAML
	// path); ScenarioName the name the summary reports.
	Scenario     string   `json:"scenario"`
	ScenarioName string   `json:"scenario_name"`
	XCAL         string   `json:"xcal,omitempty"`
	Capacity     string   `json:"capacity,omitempty"`
	DataDir      string   `json:"data_dir,omitempty"`
	Scale        float64  `json:"scale"`
	Seed         uint64   `json:"seed"`
	Seeds        []uint64 `json:"seeds,omitempty"`
	// DurationS is iperf3's duration as run (the scenario's when the
	// bench was given none).
	DurationS     float64   `json:"duration_s"`
	Repeat        int       `json:"repeat"`
	Variants      []Variant `json:"variants"`
	NoAnchorPause bool      `json:"no_anchor_pause,omitempty"`
	NoMmWaveEdge  bool      `json:"no_mmwave_edge,omitempty"`
	CommandLine   string    `json:"command_line,omitempty"`
	// SeedDB is the database file every run's proxy started from
	// (Config.SeedDB), with its SHA-256: the state carried in.
	SeedDB       string `json:"seed_db,omitempty"`
	SeedDBSHA256 string `json:"seed_db_sha256,omitempty"`
	// FromSummary: read from an older bench's summary.json, which does
	// not keep the data directory, a tunnel variant's server arguments
	// or the scenario's path (only its name).
	FromSummary bool `json:"-"`
}

// SettingsFile is the bench's settings under its output directory.
const SettingsFile = "bench.json"

func writeSettings(dir string, s Settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, SettingsFile), append(b, '\n'), 0o644)
}

// ReadSettings reads DIR/bench.json. A bench made before it existed
// (2026-12-06) has none; its summary.json then gives what it recorded
// (Settings.FromSummary). The error wraps fs.ErrNotExist when DIR has
// neither, and names the file when one is malformed.
func ReadSettings(dir string) (Settings, error) {
	var s Settings
	p := filepath.Join(dir, SettingsFile)
	b, err := os.ReadFile(p)
	if err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("%s: %w", p, err)
		}
		if s.Scenario == "" || len(s.Variants) == 0 || !(s.DurationS > 0) {
			return s, fmt.Errorf("%s: no scenario, variants or duration", p)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	p = filepath.Join(dir, "summary.json")
	b, err = os.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return s, fmt.Errorf("%s: neither %s nor summary.json: %w", dir, SettingsFile, fs.ErrNotExist)
		}
		return s, err
	}
	var sum struct {
		Scenario    string   `json:"scenario"`
		Scale       float64  `json:"scale"`
		Seed        uint64   `json:"seed"`
		Seeds       []uint64 `json:"seeds"`
		DurationS   float64  `json:"duration_s"`
		Repeat      int      `json:"repeat"`
		CommandLine string   `json:"command_line"`
		Variants    []struct {
			Name   string   `json:"name"`
			Args   []string `json:"args"`
			Tunnel bool     `json:"tunnel"`
		} `json:"variants"`
		Calibration *struct {
			Drive *struct {
				XCAL     string `json:"xcal"`
				Capacity string `json:"capacity"`
			} `json:"drive"`
		} `json:"calibration"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		return s, fmt.Errorf("%s: %w", p, err)
	}
	if sum.Scenario == "" || len(sum.Variants) == 0 || !(sum.DurationS > 0) {
		return s, fmt.Errorf("%s: no scenario, variants or duration", p)
	}
	s = Settings{Scenario: sum.Scenario, ScenarioName: sum.Scenario, Scale: sum.Scale, Seed: sum.Seed, Seeds: sum.Seeds,
		DurationS: sum.DurationS, Repeat: sum.Repeat, CommandLine: sum.CommandLine, FromSummary: true}
	for _, v := range sum.Variants {
		nv := Variant{Name: v.Name, Args: v.Args}
		if v.Tunnel {
			nv.ServerArgs = []string{} // a tunnel variant; its arguments were not recorded
		}
		s.Variants = append(s.Variants, nv)
	}
	if c := sum.Calibration; c != nil && c.Drive != nil {
		s.XCAL, s.Capacity = c.Drive.XCAL, c.Drive.Capacity
	}
	return s, nil
}

// Meta is the summary's metadata of a bench with these settings.
func (s Settings) Meta() Meta {
	m := Meta{Scenario: s.ScenarioName, Scale: s.Scale, Seed: s.Seed, Seeds: s.Seeds, DurationS: s.DurationS,
		Repeat: max(s.Repeat, 1), CommandLine: s.CommandLine, Variants: s.Variants, DataDir: s.DataDir,
		SeedDB: s.SeedDB, SeedDBSHA256: s.SeedDBSHA256}
	if len(s.Seeds) > 0 {
		m.Seed, m.Repeat = s.Seeds[0], len(s.Seeds)
	}
	return m
}
