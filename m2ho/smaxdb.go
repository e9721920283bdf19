package m2ho

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/m2ho/m2ho/signaling"
)

// DefaultSMax is ŝ_max when the database knows no cell that could stand in
// for the target: 64 KiB, the largest window an unscaled TCP receiver can
// ever advertise. Every TCP stack copes with it, a base station's per-UE
// queue is not smaller (an LTE RLC buffer alone holds several hundred KB),
// so it stays under s_max as §4.3 requires, and it is still far from the
// zero window that wastes the ~179 ms before execution (Freeze-TCP's
// mistake). It errs low: a low clamp costs some throughput for one
// handover, a high one costs an overflow and a halved cwnd.
const DefaultSMax = 64 << 10

// SMaxSource says where a Lookup's value came from.
type SMaxSource uint8

const (
	SMaxKnown     SMaxSource = iota // the target cell's own measurements
	SMaxSameType                    // unknown cell: minimum of known cells of its type
	SMaxSub6ForMm                   // mmWave target not known itself: minimum of known sub-6 cells (§4.3)
	SMaxAnyKnown                    // no cell of the type known: minimum over all known sub-6 cells
	SMaxDefault                     // nothing usable known: DefaultSMax
)

func (s SMaxSource) String() string {
	return [...]string{"known", "same-type", "sub6-for-mmwave", "any-sub6", "default"}[s]
}

type cellKey struct {
	t  signaling.CellType
	id string
}

// SMaxDB is the persistent table of ŝ_max per cell (§4.3): the largest
// queue the phone ever measured in each cell, from its flows' one-way
// delay when they carry TCP timestamps (queue.go), else the largest
// corrected burst s_b (burst.go). It is safe for concurrent use, so the
// caller may take a Snapshot under its own lock and write it from another
// goroutine than the Controller's. It is small (one entry per cell
// visited) and never touched on the packet path. It does no I/O: package
// m2ho/smaxfile stores it in a file (Marshal / UnmarshalSMaxDB are the
// bytes).
type SMaxDB struct {
	mu    sync.Mutex
	cells map[cellKey]int
	// measured: the cell's value is a queue measured from one-way delay
	// (ObserveQueue), not a burst estimate; it supersedes burst estimates.
	measured map[cellKey]bool
	// full: the cell's buffer was seen full (MarkFull): a segment lost at
	// the deepest queue measured there, so its measured value is the
	// buffer's level, not only a floor of it.
	full  map[cellKey]bool
	gen   uint64 // changes so far; a Snapshot remembers it
	saved uint64 // gen of the last snapshot reported Saved (or loaded)
	// anyFirstOverDefault: a cell's first measured queue counts against
	// DefaultSMax whatever its size (SetFirstAgainstDefault(false)).
	anyFirstOverDefault bool
	// anyBurst: a burst estimate counts however small
	// (SetBurstOverDefault(false)); else one not above DefaultSMax is
	// not used (usable).
	anyBurst bool
	// answers: how often the network answers each kind of report in
	// time (answers.go).
	answers [numAnswerKinds][numSourceTypes]answerCount
}

// SMaxSnapshot is a copy of the database's contents at one moment, in the
// stable order of its stored form, to be written outside any lock.
type SMaxSnapshot struct {
	gen     uint64
	cells   []smaxEntry
	answers []answerEntry
}

// Len is the number of cells in the snapshot.
func (s SMaxSnapshot) Len() int { return len(s.cells) }

// smaxFile is the stored form (JSON, stable order).
type smaxFile struct {
	Version int         `json:"version"`
	Cells   []smaxEntry `json:"cells"`
	// Answers: how often the network answered each kind of report in
	// time (answers.go); absent in files written before it.
	Answers []answerEntry `json:"answers,omitempty"`
}

type smaxEntry struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	SMax int    `json:"smax_bytes"`
	// Measured: from one-way delay (absent in files written before it:
	// a burst estimate).
	Measured bool `json:"measured,omitempty"`
	// Full: the buffer was seen full at that level (MarkFull); only with
	// Measured.
	Full bool `json:"full,omitempty"`
}

func cellTypeName(t signaling.CellType) string {
	switch t {
	case signaling.CellSub6:
		return "sub6"
	case signaling.CellMmWave:
		return "mmwave"
	case signaling.CellLTE:
		return "lte"
	}
	return "unknown"
}

func parseCellType(s string) (signaling.CellType, bool) {
	switch s {
	case "sub6":
		return signaling.CellSub6, true
	case "mmwave":
		return signaling.CellMmWave, true
	case "lte":
		return signaling.CellLTE, true
	case "unknown":
		return signaling.CellUnknown, true
	}
	return 0, false
}

// NewSMaxDB returns an empty database.
func NewSMaxDB() *SMaxDB {
	return &SMaxDB{cells: make(map[cellKey]int), measured: make(map[cellKey]bool), full: make(map[cellKey]bool)}
}

// UnmarshalSMaxDB reads a database from its stored form (as Marshal
// writes it). Errors name the bad field (cells[i].type); the caller adds
// where the bytes came from.
func UnmarshalSMaxDB(b []byte) (*SMaxDB, error) {
	db := NewSMaxDB()
	var f smaxFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("version %d, want 1", f.Version)
	}
	for i, e := range f.Cells {
		t, ok := parseCellType(e.Type)
		if !ok {
			return nil, fmt.Errorf("cells[%d].type %q is not sub6, mmwave, lte or unknown", i, e.Type)
		}
		if e.ID == "" {
			return nil, fmt.Errorf("cells[%d].id is empty", i)
		}
		if e.SMax <= 0 {
			return nil, fmt.Errorf("cells[%d].smax_bytes %d is not positive", i, e.SMax)
		}
		if e.Full && !e.Measured {
			return nil, fmt.Errorf("cells[%d].full without measured: only a measured queue can be the buffer's level", i)
		}
		k := cellKey{t, e.ID}
		if e.Measured {
			db.observeQueue(k, e.SMax)
		} else {
			db.observe(k, e.SMax)
		}
		if e.Full {
			db.full[k] = true
		}
	}
	if err := db.loadAnswers(f.Answers); err != nil {
		return nil, err
	}
	db.saved = db.gen // what was loaded is what the file holds
	return db, nil
}

// Snapshot copies the contents (cheap: one entry per cell visited), for
// writing outside the caller's lock; Saved(snapshot) afterwards marks
// what was written clean.
func (db *SMaxDB) Snapshot() SMaxSnapshot {
	if db == nil {
		return SMaxSnapshot{}
	}
	db.mu.Lock()
	s := SMaxSnapshot{gen: db.gen, cells: make([]smaxEntry, 0, len(db.cells))}
	for k, v := range db.cells {
		s.cells = append(s.cells, smaxEntry{ID: k.id, Type: cellTypeName(k.t), SMax: v, Measured: db.measured[k], Full: db.full[k]})
	}
	s.answers = db.answerEntries()
	db.mu.Unlock()
	sort.Slice(s.cells, func(i, j int) bool {
		if s.cells[i].Type != s.cells[j].Type {
			return s.cells[i].Type < s.cells[j].Type
		}
		return s.cells[i].ID < s.cells[j].ID
	})
	return s
}

// Marshal is the stored form of the snapshot: indented JSON with a
// trailing newline, cells in a stable order.
func (s SMaxSnapshot) Marshal() ([]byte, error) {
	f := smaxFile{Version: 1, Cells: s.cells, Answers: s.answers}
	if f.Cells == nil {
		f.Cells = []smaxEntry{}
	}
	b, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Saved records that snap was stored: the database is clean unless it
// changed after the snapshot was taken.
func (db *SMaxDB) Saved(snap SMaxSnapshot) {
	if db == nil {
		return
	}
	db.mu.Lock()
	if snap.gen > db.saved {
		db.saved = snap.gen
	}
	db.mu.Unlock()
}

// Observe records a queue of sb bytes in cell c; it reports whether ŝ_max
// of the cell grew. Cells without an ID are not recorded.
func (db *SMaxDB) Observe(c signaling.Cell, sb int) bool {
	if db == nil || c.ID == "" || sb <= 0 {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.observe(cellKey{c.Type, c.ID}, sb)
}

func (db *SMaxDB) observe(k cellKey, sb int) bool {
	if db.measured[k] || sb <= db.cells[k] {
		return false
	}
	db.cells[k] = sb
	db.gen++
	return true
}

// ObserveQueue records a queue of q bytes measured in cell c from one-way
// delay (queue.go); it reports whether ŝ_max of the cell changed. A
// measured queue replaces what the cell had before (its burst estimate,
// the value Lookup gave it from other cells, or DefaultSMax) once it is
// at least firstMeasured of that, smaller or not: a burst estimate
// assumes the arrivals, a measured queue does not.
//
// Why not at once: the first measured value is the deepest queue seen in
// the cell so far, which can be a segment. On the bench's mixed drive
// (2026-12-05, run G, m2ho seed 4, the return at 103.89 s) a first
// measure of 1448 B replaced the cell's earlier 449 KB, and a window
// held at a floor of a segment queues no deeper, so it never rose: the
// ramp's cap fell by RTT_min/RTT per RTT from 2.4 MB to 40 KB in 5 s,
// and the flow got nothing of a 1.1 Gbit/s cell for 12 s. A queue
// measured as deep as a burst estimate's firstMeasured is near the
// buffer (the estimates err high by a few percent) or above the
// estimate; the window it stands for is the controller's measuredUse.
//
// DefaultSMax too: it knows nothing of the cell, but a window held at it
// (Eqn 2's floor in a cell with nothing known) queues at most what the
// pipe leaves of 64 KiB, so a first measure under it is the window's
// queue, not the buffer's. On the bench (02-13 drive 1, seed 3, 2026-12-
// 06) a sub-6 cell's first measure of 16.6 KB became its ŝ_max, its
// neighbour took it through Lookup, and Eqn 2 held the flow at 11-14 KB
// in each of three ping-pong dwells: 107/70/37 against 287/188/185
// Mbit/s for plain CUBIC. SetFirstAgainstDefault(false) lets any first
// measure count against the default, as before.
func (db *SMaxDB) ObserveQueue(c signaling.Cell, q int) bool {
	if db == nil || c.ID == "" || q <= 0 {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	k := cellKey{c.Type, c.ID}
	if !db.measured[k] {
		prev, src, _ := db.lookup(c)
		if !(src == SMaxDefault && db.anyFirstOverDefault) && float64(q) < firstMeasured*float64(prev) {
			return false
		}
	}
	return db.observeQueue(k, q)
}

// SetFirstAgainstDefault says whether a cell's first measured queue must
// reach firstMeasured of DefaultSMax to count when nothing else stands in
// for the cell (on, the default), or counts whatever its size (off; the
// rule before 2026-12-06, kept for comparing the two on the bench).
func (db *SMaxDB) SetFirstAgainstDefault(on bool) {
	if db == nil {
		return
	}
	db.mu.Lock()
	db.anyFirstOverDefault = !on
	db.mu.Unlock()
}

// SetBurstOverDefault says whether a cell's burst estimate must be above
// DefaultSMax to stand for it, or for other cells, in Lookup (on, the
// default), or counts however small (off; the rule before 2026-12-07,
// kept for comparing the two on the bench). See usable.
func (db *SMaxDB) SetBurstOverDefault(on bool) {
	if db == nil {
		return
	}
	db.mu.Lock()
	db.anyBurst = !on
	db.mu.Unlock()
}

// usable reports whether cell k's value v may be used by Lookup: a
// measured queue always; a burst estimate only above DefaultSMax.
//
// Why. A burst estimate ŝ_b bounds the buffer from below by what arrived
// during a burst, so it is only as large as the sender made the burst; the
// default's own argument (no per-UE queue holds less than 64 KiB) is a
// bound too, and the larger of two lower bounds is the one that tells.
// The small estimates are a flow's first round trips: a sender in slow
// start sends bursts of tens of KB. On the bench's measured drives
// (2026-12-07, da6a569, seed 1) five drives of ten recorded a sub-6 or
// LTE cell of their first seconds at 31-65 KB, and through Lookup's minimum of the known
// sub-6 cells that value became the clamp of every handover to a cell
// not known yet, SN releases to LTE included: an A2 on a 130-700 Mbit/s
// mmWave cell held the flow at 10-40 KB for 0.8 s until the prediction
// was withdrawn (02-16 bw-2, 40.9 s: 10 Mbit/s where plain CUBIC had
// 106-134), where the other sub-6 cells known stood at 0.96-1.3 MB.
// Such a cell is not forgotten: its estimate still grows with larger
// bursts, and counts once above the default.
func (db *SMaxDB) usable(k cellKey, v int) bool {
	return db.measured[k] || v > DefaultSMax || db.anyBurst
}

// firstMeasured is the share of a cell's value before (a burst estimate,
// or another cell's) that its first measured queue must reach to replace
// it (ObserveQueue).
const firstMeasured = 2.0 / 3

func (db *SMaxDB) observeQueue(k cellKey, q int) bool {
	if db.measured[k] && q <= db.cells[k] {
		return false
	}
	db.cells[k], db.measured[k] = q, true
	db.gen++
	return true
}

// MarkFull records that cell c's buffer was seen full at its measured
// ŝ_max (a segment lost at the deepest queue measured there, queue.go);
// it reports whether that is news. A cell without a measured queue is
// not marked.
func (db *SMaxDB) MarkFull(c signaling.Cell) bool {
	if db == nil || c.ID == "" {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	k := cellKey{c.Type, c.ID}
	if !db.measured[k] || db.full[k] {
		return false
	}
	db.full[k] = true
	db.gen++
	return true
}

// Full reports whether cell c's buffer was seen full (MarkFull), and the
// cell's ŝ_max now (0 if not full).
func (db *SMaxDB) Full(c signaling.Cell) (int, bool) {
	if db == nil {
		return 0, false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	k := cellKey{c.Type, c.ID}
	if !db.full[k] {
		return 0, false
	}
	return db.cells[k], true
}

// MinFull is the least ŝ_max among the cells of type t whose buffer was
// seen full (MarkFull), and whether there is one.
func (db *SMaxDB) MinFull(t signaling.CellType) (int, bool) {
	if db == nil {
		return 0, false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	m, found := 0, false
	for k, full := range db.full {
		if v := db.cells[k]; full && k.t == t && (!found || v < m) {
			m, found = v, true
		}
	}
	return m, found
}

// Get returns the recorded ŝ_max of exactly this cell.
func (db *SMaxDB) Get(c signaling.Cell) (int, bool) {
	if db == nil {
		return 0, false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	v, ok := db.cells[cellKey{c.Type, c.ID}]
	return v, ok
}

// Lookup is ŝ_max for a handover target (§4.3): the cell's own value when
// known (on mmWave too: the queue measured from one-way delay, and the
// corrected ŝ_b = S − arrival·D, bound the buffer from below whether or
// not a burst's end is a drained queue, see Controller.onSlot); for an unknown mmWave target the minimum known
// sub-6 value (§4.3: mmWave buffers are assumed no smaller than sub-6
// ones); for an unknown cell of another type the minimum of known cells
// of the same type, then of any sub-6 cell; else DefaultSMax. Burst
// estimates not above DefaultSMax are left out (usable).
func (db *SMaxDB) Lookup(target signaling.Cell) (int, SMaxSource) {
	v, src, _ := db.LookupMeasured(target)
	return v, src
}

// LookupMeasured is Lookup, and whether the value is a measured queue
// (ObserveQueue) rather than a burst estimate or the default.
func (db *SMaxDB) LookupMeasured(target signaling.Cell) (int, SMaxSource, bool) {
	if db == nil {
		return DefaultSMax, SMaxDefault, false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.lookup(target)
}

// lookup is LookupMeasured with db.mu held.
func (db *SMaxDB) lookup(target signaling.Cell) (int, SMaxSource, bool) {
	own := cellKey{target.Type, target.ID}
	if v, ok := db.cells[own]; ok && target.ID != "" && target.Type == signaling.CellMmWave && db.usable(own, v) {
		return v, SMaxKnown, db.measured[own]
	}
	if target.Type == signaling.CellMmWave {
		if v, m, ok := db.minWhere(func(t signaling.CellType) bool { return t.IsSub6() }); ok {
			return v, SMaxSub6ForMm, m
		}
		return DefaultSMax, SMaxDefault, false
	}
	if v, ok := db.cells[own]; ok && target.ID != "" && db.usable(own, v) {
		return v, SMaxKnown, db.measured[own]
	}
	if target.Type != signaling.CellUnknown {
		if v, m, ok := db.minWhere(func(t signaling.CellType) bool { return t == target.Type }); ok {
			return v, SMaxSameType, m
		}
	}
	if v, m, ok := db.minWhere(func(t signaling.CellType) bool { return t.IsSub6() }); ok {
		return v, SMaxAnyKnown, m
	}
	return DefaultSMax, SMaxDefault, false
}

// minWhere is the least value of the cells keep accepts, and whether it
// is measured.
func (db *SMaxDB) minWhere(keep func(signaling.CellType) bool) (int, bool, bool) {
	m, meas, found := 0, false, false
	for k, v := range db.cells {
		if keep(k.t) && db.usable(k, v) && (!found || v < m) {
			m, meas, found = v, db.measured[k], true
		}
	}
	return m, meas, found
}

// Dirty reports whether the database changed since it was loaded or since
// the snapshot last reported Saved.
func (db *SMaxDB) Dirty() bool {
	if db == nil {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.gen != db.saved
}

// Len is the number of cells recorded.
func (db *SMaxDB) Len() int {
	if db == nil {
		return 0
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return len(db.cells)
}
