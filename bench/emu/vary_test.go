package emu

import (
	"fmt"
	"testing"
	"time"
)

// A drive whose cells come from cell_defaults (a replayed XCAL log without
// a capacity log) gives each cell its own measured-variability trace: two
// sub-6 cells of one drive do not share one level, and the same seed
// gives the same traces.
func TestDefaultCellsVaryApart(t *testing.T) {
	const base = `name: t
duration: 30s
seed: 7
capacity_variation: %s
cell_defaults:
  sub6: {buffer: 1MB, capacity: {mbps: 170}}
cells:
  - {id: a, type: sub6, buffer: 1MB, capacity: {mbps: 170}}
schedule:
  handovers:
    - {at: 5s, to: x, type: sub6}
    - {at: 10s, to: y, type: sub6}
`
	// bytes returns, per cell of the model, the bytes it could serve in
	// each second of the run.
	bytes := func(variation string) map[string][]int64 {
		t.Helper()
		sc, err := ParseScenario("t.yaml", "", []byte(fmt.Sprintf(base, variation)), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(sc.Config, time.Unix(0, 0), 7)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]int64{}
		for _, c := range m.cells {
			for s := range 30 {
				from := time.Duration(s) * time.Second
				out[c.ID] = append(out[c.ID], c.Capacity.Bytes(from, from+time.Second))
			}
		}
		return out
	}
	same := func(a, b []int64) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return len(a) == len(b)
	}
	v := bytes("measured")
	if len(v) != 3 {
		t.Fatalf("cells %v, want a, x, y", len(v))
	}
	if same(v["x"], v["y"]) {
		t.Errorf("cells x and y made from the defaults share one capacity trace: %v", v["x"])
	}
	if same(v["a"], v["x"]) {
		t.Errorf("cell x made from the defaults has the declared cell a's trace")
	}
	again := bytes("measured")
	for id := range v {
		if !same(v[id], again[id]) {
			t.Errorf("cell %s: same seed, different trace", id)
		}
	}
	c := bytes("none")
	if !same(c["x"], c["y"]) || c["x"][0] != 170e6/8 {
		t.Errorf("constant defaults: x %v, y %v, want 21250000 every second", c["x"][:3], c["y"][:3])
	}
}
