package m2ho

import (
	"math"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/signaling"
)

type slotIn struct {
	us    int // time in µs
	rb    float64
	bytes int
}

func TestBurstDetector(t *testing.T) {
	tests := []struct {
		name  string
		slots []slotIn
		want  []int // s_b of each burst that ended, in order
	}{
		{"full, full, partial, empty", []slotIn{{0, 0.95, 100}, {125, 0.95, 100}, {250, 0.3, 20}, {375, 0, 0}}, []int{220}},
		{"0.9 is not more than 90 %", []slotIn{{0, 0.9, 100}, {125, 0.3, 20}, {250, 0, 0}}, nil},
		{"partial not followed by empty continues", []slotIn{{0, 0.95, 100}, {125, 0.3, 10}, {250, 0.5, 50}, {375, 0.2, 5}, {500, 0, 0}}, []int{165}},
		{"0.4 is not less than 40 %", []slotIn{{0, 0.95, 100}, {125, 0.4, 10}, {250, 0, 0}, {375, 0, 0}}, []int{110}},
		{"empty slot inside a burst, then more", []slotIn{{0, 0.95, 100}, {125, 0, 0}, {250, 0.95, 100}, {375, 0.1, 1}, {500, 0, 0}}, []int{201}},
		{"two empty slots end it", []slotIn{{0, 0.95, 100}, {125, 0, 0}, {250, 0, 0}}, []int{100}},
		{"bytes 0 with RBs counts as empty", []slotIn{{0, 0.95, 100}, {125, 0.3, 10}, {250, 0.5, 0}}, []int{110}},
		{"NaN counts as empty", []slotIn{{0, 0.95, 100}, {125, 0.3, 10}, {250, math.NaN(), 7}}, []int{110}},
		{"full slot with no bytes does not start", []slotIn{{0, 0.95, 0}, {125, 0.3, 10}, {250, 0, 0}}, nil},
		{"gap in the feed aborts", []slotIn{{0, 0.95, 100}, {1000, 0.3, 10}, {50000, 0, 0}}, nil},
		{"gap before a new burst is fine", []slotIn{{0, 0.95, 100}, {125, 0.3, 10}, {250, 0, 0}, {90000, 0.99, 50}, {90125, 0.1, 5}, {90250, 0, 0}}, []int{110, 55}},
		{"never ends", []slotIn{{0, 0.95, 100}, {125, 0.95, 100}}, nil},
		// A saturated cell: full slots for longer than burstMaxLen is a
		// busy period, not a drained queue.
		{"busy period longer than 100 ms is not a burst", longBurst(150000), nil},
		{"100 ms burst still counts", longBurst(100000), []int{199*100 + 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d burstDetector
			var got []int
			for _, s := range tc.slots {
				if sb, ok := d.slot(t0.Add(usDur(s.us)), s.rb, s.bytes, 0); ok {
					got = append(got, int(sb.bytes))
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("bursts %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("bursts %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func cell(t signaling.CellType, id string) signaling.Cell { return signaling.Cell{ID: id, Type: t} }

func TestSMaxLookupFallbacks(t *testing.T) {
	db := NewSMaxDB()
	if v, src := db.Lookup(cell(sub6, "1")); v != DefaultSMax || src != SMaxDefault {
		t.Fatalf("empty db: %d %v", v, src)
	}
	if v, src := db.Lookup(cell(mmw, "1")); v != DefaultSMax || src != SMaxDefault {
		t.Fatalf("empty db, mmWave: %d %v", v, src)
	}
	var nilDB *SMaxDB
	if v, src := nilDB.Lookup(cell(sub6, "1")); v != DefaultSMax || src != SMaxDefault || nilDB.Dirty() || nilDB.Observe(cell(sub6, "1"), 5) {
		t.Fatalf("nil db: %d %v", v, src)
	}

	db.Observe(cell(sub6, "A"), 300000)
	db.Observe(cell(sub6, "B"), 200000)
	db.Observe(cell(lte, "L"), 500000)
	db.Observe(cell(mmw, "M"), 900000) // an mmWave cell's own bursts
	tests := []struct {
		name string
		c    signaling.Cell
		v    int
		src  SMaxSource
	}{
		{"known sub6", cell(sub6, "A"), 300000, SMaxKnown},
		{"unknown sub6: min of sub6", cell(sub6, "Z"), 200000, SMaxSameType},
		{"sub6 without id: min of sub6", cell(sub6, ""), 200000, SMaxSameType},
		{"known lte", cell(lte, "L"), 500000, SMaxKnown},
		{"unknown lte: min of lte", cell(lte, "Q"), 500000, SMaxSameType},
		{"known mmWave: its own", cell(mmw, "M"), 900000, SMaxKnown},
		{"mmWave without id: min sub-6 (LTE included)", cell(mmw, ""), 200000, SMaxSub6ForMm},
		{"unknown mmWave: min sub-6", cell(mmw, "N"), 200000, SMaxSub6ForMm},
		{"unknown type: min of any sub-6", cell(unk, "?"), 200000, SMaxAnyKnown},
		{"same id other type is another cell", cell(lte, "A"), 500000, SMaxSameType},
	}
	for _, tc := range tests {
		if v, src := db.Lookup(tc.c); v != tc.v || src != tc.src {
			t.Fatalf("%s: %d %v, want %d %v", tc.name, v, src, tc.v, tc.src)
		}
	}
	// Only LTE known: an unknown sub-6 cell falls back to any sub-6 (LTE).
	db2 := NewSMaxDB()
	db2.Observe(cell(lte, "L"), 123456)
	if v, src := db2.Lookup(cell(sub6, "x")); v != 123456 || src != SMaxAnyKnown {
		t.Fatalf("lte only: %d %v", v, src)
	}
}

func TestSMaxObserveOnlyGrows(t *testing.T) {
	db := NewSMaxDB()
	if db.Dirty() {
		t.Fatal("new db dirty")
	}
	if !db.Observe(cell(sub6, "A"), 1000) || !db.Dirty() {
		t.Fatal("first burst not recorded")
	}
	if db.Observe(cell(sub6, "A"), 999) || db.Observe(cell(sub6, "A"), 1000) {
		t.Fatal("smaller burst lowered or re-set ŝ_max")
	}
	if !db.Observe(cell(sub6, "A"), 1001) {
		t.Fatal("larger burst ignored")
	}
	if db.Observe(cell(sub6, ""), 5000) || db.Observe(cell(sub6, "B"), 0) || db.Observe(cell(sub6, "B"), -3) {
		t.Fatal("recorded a cell without id or a non-positive burst")
	}
	if v, _ := db.Get(cell(sub6, "A")); v != 1001 {
		t.Fatalf("ŝ_max %d", v)
	}
}

// TestSMaxSnapshotSaved: a snapshot marks clean exactly what it holds; a
// change after it keeps the database dirty, a stale snapshot changes
// nothing.
func TestSMaxSnapshotSaved(t *testing.T) {
	db := NewSMaxDB()
	db.Observe(cell(sub6, "A"), 300000)
	db.Observe(cell(lte, "L"), 400000)
	s1 := db.Snapshot()
	if s1.Len() != 2 || !db.Dirty() {
		t.Fatalf("snapshot of %d cells, dirty %v", s1.Len(), db.Dirty())
	}
	db.Saved(s1)
	if db.Dirty() {
		t.Fatal("dirty after its snapshot was saved")
	}
	s2 := db.Snapshot()
	db.Observe(cell(sub6, "A"), 350000) // while s2 is being written
	db.Saved(s2)
	if !db.Dirty() {
		t.Fatal("a change after the snapshot was marked clean")
	}
	db.Saved(s1) // stale: must not mark anything clean either
	if !db.Dirty() {
		t.Fatal("a stale snapshot marked the database clean")
	}
	b, err := db.Snapshot().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "version": 1,
  "cells": [
    {
      "id": "L",
      "type": "lte",
      "smax_bytes": 400000
    },
    {
      "id": "A",
      "type": "sub6",
      "smax_bytes": 350000
    }
  ]
}
`
	if string(b) != want {
		t.Fatalf("stored form:\n%s\nwant:\n%s", b, want)
	}
	re, err := UnmarshalSMaxDB(b)
	if err != nil {
		t.Fatal(err)
	}
	if v, src := re.Lookup(cell(sub6, "A")); v != 350000 || src != SMaxKnown || re.Dirty() {
		t.Fatalf("reloaded: %d %v dirty=%v", v, src, re.Dirty())
	}
	if b, err := NewSMaxDB().Snapshot().Marshal(); err != nil || string(b) != "{\n  \"version\": 1,\n  \"cells\": []\n}\n" {
		t.Fatalf("empty: %q %v", b, err)
	}
}

func TestUnmarshalSMaxDBErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"not json", "{", "unexpected end"},
		{"bad version", `{"version":2,"cells":[]}`, "version 2"},
		{"bad type", `{"version":1,"cells":[{"id":"a","type":"wifi","smax_bytes":1}]}`, "cells[0].type"},
		{"empty id", `{"version":1,"cells":[{"id":"","type":"sub6","smax_bytes":1}]}`, "cells[0].id"},
		{"zero smax", `{"version":1,"cells":[{"id":"a","type":"sub6","smax_bytes":5},{"id":"b","type":"lte","smax_bytes":0}]}`, "cells[1].smax_bytes"},
	}
	for _, tc := range tests {
		if _, err := UnmarshalSMaxDB([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// longBurst is full 100-byte slots every 500 µs from 0 up to lenUS-1 ms,
// a partial 10-byte slot at lenUS-500 µs and the empty slot at lenUS that
// ends the burst lenUS after it began.
func longBurst(lenUS int) []slotIn {
	var sl []slotIn
	for us := 0; us <= lenUS-1000; us += 500 {
		sl = append(sl, slotIn{us, 0.95, 100})
	}
	return append(sl, slotIn{lenUS - 500, 0.3, 10}, slotIn{lenUS, 0, 0})
}

// A measured queue supersedes burst estimates, smaller or not, once it is
// at least firstMeasured of the value it replaces (a first measure of a
// segment does not), and keeps the largest measured; later burst
// estimates change nothing; the flag survives the file, and a file
// without it loads as burst estimates. A cell with no value of its own
// compares with what Lookup gives it from other cells, or with
// DefaultSMax (unless SetFirstAgainstDefault(false)).
func TestSMaxMeasuredSupersedes(t *testing.T) {
	db := NewSMaxDB()
	A := cell(sub6, "A")
	db.Observe(A, 700_000) // a burst estimate above the buffer
	if v, _, m := db.LookupMeasured(A); v != 700_000 || m {
		t.Fatalf("burst estimate: %d measured %v", v, m)
	}
	if db.ObserveQueue(A, 1448) || db.ObserveQueue(A, 400_000) {
		t.Fatal("a first measured queue under 2/3 of the burst estimate replaced it")
	}
	if v, _, m := db.LookupMeasured(A); v != 700_000 || m {
		t.Fatalf("after small measures: %d measured %v, want the burst estimate", v, m)
	}
	if !db.ObserveQueue(A, 480_000) {
		t.Fatal("a first measured queue at 2/3 of the burst estimate did not replace it")
	}
	if db.ObserveQueue(A, 390_000) || db.Observe(A, 800_000) {
		t.Fatal("a smaller measured queue or a burst estimate changed a measured value")
	}
	db.ObserveQueue(A, 490_000)
	if v, src, m := db.LookupMeasured(A); v != 490_000 || src != SMaxKnown || !m {
		t.Fatalf("after measuring: %d %v measured %v", v, src, m)
	}
	// An mmWave cell never seen takes the least sub-6 value (490 KB): a
	// first measure must reach 2/3 of that.
	M := cell(mmw, "M")
	if db.ObserveQueue(M, 1448) {
		t.Fatal("a segment measured on an unknown mmWave cell replaced the sub-6 fallback")
	}
	if !db.ObserveQueue(M, 400_000) {
		t.Fatal("a measure at 0.82 of the sub-6 fallback did not count")
	}
	// Against DefaultSMax the same rule: a window held at the default
	// queues no deeper than it, so a segment is no buffer.
	noneYet := NewSMaxDB()
	if noneYet.ObserveQueue(A, 16_600) {
		t.Fatal("a first measure of 16.6 KB replaced DefaultSMax")
	}
	if v, src, m := noneYet.LookupMeasured(A); v != DefaultSMax || src != SMaxDefault || m {
		t.Fatalf("after a small first measure: %d %v measured %v, want the default", v, src, m)
	}
	if !noneYet.ObserveQueue(A, DefaultSMax*2/3+1) {
		t.Fatal("a first measure at 2/3 of DefaultSMax did not count")
	}
	anyFirst := NewSMaxDB()
	anyFirst.SetFirstAgainstDefault(false)
	if !anyFirst.ObserveQueue(A, 1448) {
		t.Fatal("with the rule off, a first measure against DefaultSMax did not count")
	}
	// A cell with no value of its own takes the least of its type, and
	// that one's flag.
	db.Observe(cell(sub6, "B"), 100_000)
	if v, src, m := db.LookupMeasured(cell(sub6, "X")); v != 100_000 || src != SMaxSameType || m {
		t.Fatalf("unknown sub-6 cell: %d %v measured %v", v, src, m)
	}
	// Only a measured queue can be marked as the buffer's level.
	if db.MarkFull(cell(sub6, "B")) {
		t.Fatal("a burst estimate marked full")
	}
	if _, full := db.Full(A); full {
		t.Fatal("full before MarkFull")
	}
	if !db.MarkFull(A) || db.MarkFull(A) {
		t.Fatal("MarkFull: not news the first time, or news the second")
	}
	b, err := db.Snapshot().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	db2, err := UnmarshalSMaxDB(b)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, m := db2.LookupMeasured(A); v != 490_000 || !m {
		t.Fatalf("reloaded: %d measured %v", v, m)
	}
	if _, _, m := db2.LookupMeasured(cell(sub6, "B")); m {
		t.Fatal("reloaded: a burst estimate came back measured")
	}
	if v, full := db2.Full(A); v != 490_000 || !full {
		t.Fatalf("reloaded: full %v at %d", full, v)
	}
	if _, full := db2.Full(cell(sub6, "B")); full {
		t.Fatal("reloaded: a burst estimate came back full")
	}
	if db2.Dirty() {
		t.Fatal("dirty right after loading")
	}
	old, err := UnmarshalSMaxDB([]byte(`{"version": 1, "cells": [{"id": "A", "type": "sub6", "smax_bytes": 500000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, _, m := old.LookupMeasured(A); v != 500_000 || m {
		t.Fatalf("a file without the flag: %d measured %v", v, m)
	}
}

// A burst estimate not above DefaultSMax stands neither for its cell nor,
// through Lookup's minimum, for cells not known yet (SMaxDB.usable): the
// first round trips of a flow make bursts of tens of KB, and the default
// is a bound on the buffer at least as good. Measured queues count
// whatever their size; the estimate is kept and counts once it grows
// past the default; SetBurstOverDefault(false) counts any.
func TestBurstOverDefault(t *testing.T) {
	L, A, B, M := cell(lte, "lte-0"), cell(sub6, "A"), cell(sub6, "B"), cell(mmw, "M")
	db := NewSMaxDB()
	db.Observe(L, 31_458) // slow start in the first cell
	db.Observe(A, 955_680)
	db.Observe(B, 1_217_768)
	// An SN release: to an LTE cell not known; a mmWave cell not known.
	if v, src := db.Lookup(cell(lte, "")); v != 955_680 || src != SMaxAnyKnown {
		t.Errorf("unknown LTE target: %d (%v), want A's 955680 (any-sub6)", v, src)
	}
	if v, src := db.Lookup(M); v != 955_680 || src != SMaxSub6ForMm {
		t.Errorf("unknown mmWave target: %d (%v), want A's 955680", v, src)
	}
	if v, src := db.Lookup(L); v != 955_680 || src != SMaxAnyKnown {
		t.Errorf("the small cell itself: %d (%v), want A's 955680 (its own estimate left out)", v, src)
	}
	only := NewSMaxDB()
	only.Observe(L, DefaultSMax)
	if v, src := only.Lookup(L); v != DefaultSMax || src != SMaxDefault {
		t.Errorf("an estimate at the default: %d (%v), want the default", v, src)
	}
	if !only.Observe(L, DefaultSMax+1) {
		t.Fatal("the estimate did not grow")
	}
	if v, src := only.Lookup(L); v != DefaultSMax+1 || src != SMaxKnown {
		t.Errorf("an estimate above the default: %d (%v), want it, known", v, src)
	}
	// A measured queue counts whatever its size.
	q := NewSMaxDB()
	q.SetFirstAgainstDefault(false)
	q.ObserveQueue(A, 20_000)
	if v, src, m := q.LookupMeasured(B); v != 20_000 || src != SMaxSameType || !m {
		t.Errorf("a small measured queue: %d (%v, measured %v), want 20000 same-type measured", v, src, m)
	}
	// The rule off: as before.
	db.SetBurstOverDefault(false)
	if v, src := db.Lookup(cell(lte, "")); v != 31_458 || src != SMaxSameType {
		t.Errorf("rule off, unknown LTE target: %d (%v), want the LTE cell's 31458", v, src)
	}
}
