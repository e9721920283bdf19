package driver

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

// The file-system side of scenario loading: the pure loader in bench/emu
// parses bytes and readers and opens what a scenario refers to through
// emu.LoadOptions.Open; these wrappers supply the file system.

// LoadScenario reads a scenario YAML file; relative paths in it resolve
// against the file's directory (../shared/data/... against the shared data
// directory, opts.DataDir or DataDir).
func LoadScenario(path string, opts emu.LoadOptions) (*emu.Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	base := filepath.Dir(path)
	return emu.ParseScenario(path, base, data, withFiles(opts, base))
}

// Builtin returns one of the scenarios compiled into the binary
// (emu.BuiltinNames lists them), with the files it refers to read from the
// file system.
func Builtin(name string, opts emu.LoadOptions) (*emu.Scenario, error) {
	return emu.Builtin(name, withFiles(opts, ""))
}

// withFiles fills in the file opener and the shared data directory.
func withFiles(opts emu.LoadOptions, base string) emu.LoadOptions {
	if opts.Open == nil {
		opts.Open = OpenFile
	}
	if opts.DataDir == "" {
		opts.DataDir = DataDir(base)
	}
	return opts
}

// OpenFile opens path for reading (emu.LoadOptions.Open over the file
// system).
func OpenFile(path string) (io.ReadCloser, error) { return os.Open(path) }

// LoadCapacity opens path and parses it with the parser of kind:
// "mahimahi", "iperf3" or "mbps-trace".
func LoadCapacity(kind, path string) (emu.Capacity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return emu.ParseCapacity(kind, path, f)
}

// DataDir is where tests and scenarios find /work/shared/data:
// $M2HO_SHARED_DATA if set, else <repo root>/../shared/data, with the repo
// root found by walking up from dir to go.mod.
func DataDir(dir string) string {
	if d := os.Getenv("M2HO_SHARED_DATA"); d != "" {
		return d
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		for d := abs; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return filepath.Join(d, "..", "shared", "data")
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return filepath.Join("..", "shared", "data")
}

// ReadXCAL reads an XCAL export for a measured scenario: what the log
// records (emu.Recorded: the reader's inferred handovers are left out),
// and how many rows did not parse (skipped; the first such error is
// returned as firstBad). An I/O error ends the load.
func ReadXCAL(path string) (evs []signaling.Event, bad int, firstBad error, err error) {
	all, _, errs := sigio.ReadAll(path, signaling.FormatXCAL)
	for _, e := range errs {
		var pe *signaling.ParseError
		if !errors.As(e, &pe) {
			return nil, 0, nil, e
		}
		if bad == 0 {
			firstBad = e
		}
		bad++
	}
	return emu.Recorded(all), bad, firstBad, nil
}
