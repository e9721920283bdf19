package signaling

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// sharedData resolves the shared data directory: $M2HO_SHARED_DATA, else
// <repo root>/../shared/data. It skips the test when the data is absent.
func sharedData(t testing.TB, sub string) string {
	t.Helper()
	dir := os.Getenv("M2HO_SHARED_DATA")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		root := wd
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Skip("no go.mod above the package; cannot find shared data")
			}
			root = parent
		}
		dir = filepath.Join(root, "..", "shared", "data")
	}
	dir = filepath.Join(dir, sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared data absent (%v); set M2HO_SHARED_DATA", err)
	}
	return dir
}

func xcalFiles(t testing.TB) []string {
	dir := sharedData(t, "m2ho-mobicom24")
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.EqualFold(filepath.Ext(p), ".csv") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// TestXCALAllFiles reads every XCAL export of the M2HO artifact: no row may
// be malformed, every row is accounted for, and the handover commands the
// reader decides causally agree with what the log shows afterwards (the
// reason of the next random access), which the reader never looks at.
func TestXCALAllFiles(t *testing.T) {
	files := xcalFiles(t)
	if len(files) != 17 {
		t.Errorf("found %d XCAL files, want the artifact's 17", len(files))
	}
	var total Stats
	var inf XCALInference
	classes := map[HOKind]map[HOType]int{}
	snChecked := 0
	inferred := map[HOKind]int{}
	inferredClass := map[HOType]int{}
	var table strings.Builder
	fmt.Fprintf(&table, "| file | rows | events | reports | HO cmds | sn-change | lte-anchor | sn-addition | horizontal | sub6-to-mmwave | mmwave-to-sub6 | RA (fail/abort) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(f)))), f)
		if strings.Contains(f, "sample_link_layer_traces") {
			rel = filepath.Join("sample_link_layer_traces", filepath.Base(f))
		}
		r := NewXCALReader(fh, f)
		var events []Event
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("%v", err)
				var pe *ParseError
				if errors.As(err, &pe) {
					continue
				}
				break
			}
			events = append(events, e)
		}
		fh.Close()
		st := r.Stats()
		if st.Errors != 0 {
			t.Errorf("%s: %d parse errors", f, st.Errors)
		}
		if got := st.Events + st.SkippedTotal() + st.Errors; got != st.Lines {
			t.Errorf("%s: %d events + %d skipped + %d errors != %d rows", f, st.Events, st.SkippedTotal(), st.Errors, st.Lines)
		}
		ri := r.Inference()
		nInf := ri.InferredAnchor + ri.InferredRelease + ri.InferredReleaseLate
		if st.Events+nInf != len(events) {
			t.Errorf("%s: Stats.Events %d + inferred %d, returned %d", f, st.Events, nInf, len(events))
		}
		fileClass := map[HOType]int{}
		raFail, raAbort := 0, 0
		for i, e := range events {
			if i > 0 && e.Time.Before(events[i-1].Time) {
				t.Errorf("%s: event %d at %v before previous %v", f, i, e.Time, events[i-1].Time)
			}
			if e.Kind == KindRandomAccess {
				switch e.RAResult {
				case RAFailure:
					raFail++
				case RAAborted:
					raAbort++
				}
			}
			if e.Kind != KindHOCommand {
				continue
			}
			if e.Inferred {
				// Look ahead (the test may): an inferred handover says the
				// SCG is gone, so no NR report may follow before the next
				// command; and it left no command row, so no random access
				// for a handover may follow before the next command.
				inferred[e.HO]++
				inferredClass[e.HOType()]++
				for _, n := range events[i+1:] {
					if n.Kind == KindHOCommand {
						break
					}
					if n.Kind == KindReport && n.Serving.Type != CellLTE {
						t.Errorf("%s: inferred %v at %v refuted by an NR report at %v", f, e.HO, e.Time, n.Time)
						break
					}
					if n.Kind == KindRandomAccess && n.RAReason == RAHandover {
						t.Errorf("%s: inferred %v at %v followed by random access for a handover at %v", f, e.HO, e.Time, n.Time)
						break
					}
				}
				continue
			}
			c := e.HOType()
			if c == HOTypeUnknown {
				t.Errorf("%s: %v handover at %v with unknown class (serving %v, target %v)", f, e.HO, e.Time, e.Serving.Type, e.Target.Type)
			}
			fileClass[c]++
			if classes[e.HO] == nil {
				classes[e.HO] = map[HOType]int{}
			}
			classes[e.HO][c]++
			// The report an SN change answers (the last NR report since
			// the previous command) named a neighbour of the target's
			// type: the causal neighbour-type inference was right.
			if e.HO == HOSNChange {
				for j := i - 1; j >= 0 && events[j].Kind != KindHOCommand; j-- {
					if r := events[j]; r.Kind == KindReport && r.Serving.Type != CellLTE {
						if r.Neighbor.Type != e.Target.Type {
							t.Errorf("%s: SN change at %v to %v answers a report naming a %v neighbour", f, e.Time, e.Target.Type, r.Neighbor.Type)
						}
						snChecked++
						break
					}
				}
			}
			// Look ahead (the test may): the next random access must
			// be the one the kind implies.
			want := RAHandover
			if e.HO == HOSNAddition {
				want = RAConnectionRequest
			}
			for _, n := range events[i+1:] {
				if n.Kind == KindHOCommand {
					t.Errorf("%s: %v at %v followed by another command before any random access", f, e.HO, e.Time)
					break
				}
				if n.Kind == KindRandomAccess {
					if n.RAReason != want {
						t.Errorf("%s: %v at %v followed by random access for %v, want %v", f, e.HO, e.Time, n.RAReason, want)
					}
					break
				}
			}
		}
		if st.HO[HOSNChange] == 0 || st.HO[HOSNAddition] == 0 {
			t.Errorf("%s: want SN changes and additions, got %v", f, st.HO)
		}
		nHO := st.Kinds[KindHOCommand]
		if s := st.HO[HOSNChange] + st.HO[HOLTEAnchor] + st.HO[HOSNAddition] + st.HO[HOSNRelease] + st.HO[HOIntraNR]; s != nHO {
			t.Errorf("%s: HO kinds sum %d != %d commands", f, s, nHO)
		}
		if s := fileClass[HOHorizontal] + fileClass[HOSub6ToMmWave] + fileClass[HOMmWaveToSub6]; s != nHO {
			t.Errorf("%s: HO classes sum %d != %d commands", f, s, nHO)
		}
		fmt.Fprintf(&table, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d (%d/%d) |\n", rel, st.Lines, st.Events,
			st.Kinds[KindReport], nHO, st.HO[HOSNChange], st.HO[HOLTEAnchor], st.HO[HOSNAddition],
			fileClass[HOHorizontal], fileClass[HOSub6ToMmWave], fileClass[HOMmWaveToSub6], st.Kinds[KindRandomAccess], raFail, raAbort)
		total.Add(st)
		inf.UnknownEvent += ri.UnknownEvent
		inf.SuffixedEvent += ri.SuffixedEvent
		inf.InferredAnchor += ri.InferredAnchor
		inf.InferredRelease += ri.InferredRelease
		inf.InferredReleaseLate += ri.InferredReleaseLate
		inf.NeighborSameAsServing += ri.NeighborSameAsServing
		inf.NeighborFromPCI += ri.NeighborFromPCI
		inf.NeighborDefault += ri.NeighborDefault
		inf.NeighborUnknown += ri.NeighborUnknown
		inf.ServingFromPSCell += ri.ServingFromPSCell
		inf.ServingFromPCI += ri.ServingFromPCI
		inf.ServingUnknown += ri.ServingUnknown
		inf.TargetFromNRReport += ri.TargetFromNRReport
		inf.TargetFromB1 += ri.TargetFromB1
		inf.TargetFromPSCell += ri.TargetFromPSCell
		inf.TargetUnknown += ri.TargetUnknown
		inf.PSCellMismatch += ri.PSCellMismatch
	}
	t.Logf("per file:\n%s", table.String())
	t.Logf("total: rows %d events %d errors %d kinds %v HO %v", total.Lines, total.Events, total.Errors, total.Kinds, total.HO)
	t.Logf("HO classes by kind: %v", classes)
	t.Logf("inferred handovers: %v, by class %v", inferred, inferredClass)
	var sk []string
	for k, v := range total.Skipped {
		sk = append(sk, fmt.Sprintf("%6d %s", v, k))
	}
	sort.Strings(sk)
	t.Logf("skipped:\n%s", strings.Join(sk, "\n"))
	t.Logf("inference: %+v", inf)
	t.Logf("SN changes whose NR report neighbour type matched the target: %d of %d", snChecked, total.HO[HOSNChange])
	if snChecked < total.HO[HOSNChange]*9/10 {
		t.Errorf("only %d of %d SN changes have an NR report to check", snChecked, total.HO[HOSNChange])
	}
	if total.HO[HOSNChange] == 0 || total.HO[HOLTEAnchor] == 0 || total.HO[HOSNAddition] == 0 {
		t.Errorf("want every kind of handover in the artifact, got %v", total.HO)
	}
	if inf.ServingUnknown != 0 {
		t.Errorf("%d NR reports with unknown serving type", inf.ServingUnknown)
	}
}

// Every event of the real XCAL files, inferred handovers included, reads
// back equal from its JSON line: `m2ho feed` of an XCAL file and of its
// JSON-lines conversion give the controller the same events.
func TestXCALJSONRoundTrip(t *testing.T) {
	inferred := 0
	for _, f := range xcalFiles(t) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		var buf strings.Builder
		w := NewWriter(&buf)
		var want []Event
		r := NewXCALReader(fh, f)
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				continue // counted and checked by TestXCALAllFiles
			}
			if e.Inferred {
				inferred++
			}
			if err := w.Write(&e); err != nil {
				t.Fatalf("%s: writing %+v: %v", f, e, err)
			}
			e.Time = e.Time.UTC()
			want = append(want, e)
		}
		fh.Close()
		jr := NewJSONReader(strings.NewReader(buf.String()), f+".jsonl")
		for i := range want {
			got, err := jr.Next()
			if err != nil {
				t.Fatalf("%s: event %d: %v", f, i, err)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("%s: event %d read back as\n%+v\nwant\n%+v", f, i, got, want[i])
			}
		}
		if _, err := jr.Next(); err != io.EOF {
			t.Fatalf("%s: after the last event: %v", f, err)
		}
	}
	if inferred == 0 {
		t.Error("no inferred handover in the files: the test checks nothing of them")
	}
	t.Logf("%d inferred handovers round-tripped", inferred)
}
