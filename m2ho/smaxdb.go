package m2ho

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	SMaxKnown     SMaxSource = iota // the target cell's own bursts
	SMaxSameType                    // unknown cell: minimum of known cells of its type
	SMaxSub6ForMm                   // mmWave target: minimum of known sub-6 cells (§4.3)
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
// burst s_b ever seen in each cell. It is safe for concurrent use, so the
// caller may Save from another goroutine than the Controller's. It is
// small (one entry per cell visited) and never touched on the packet path.
type SMaxDB struct {
	path string

	mu    sync.Mutex
	cells map[cellKey]int
	dirty bool
}

// smaxFile is the on-disk form (JSON, stable order).
type smaxFile struct {
	Version int         `json:"version"`
	Cells   []smaxEntry `json:"cells"`
}

type smaxEntry struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	SMax int    `json:"smax_bytes"`
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

// NewSMaxDB returns an empty in-memory database that saves to path (""
// means never: Save is then a no-op).
func NewSMaxDB(path string) *SMaxDB {
	return &SMaxDB{path: path, cells: make(map[cellKey]int)}
}

// OpenSMaxDB reads the database at path; a missing file is an empty
// database that Save will create.
func OpenSMaxDB(path string) (*SMaxDB, error) {
	db := NewSMaxDB(path)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return db, nil
	}
	if err != nil {
		return nil, fmt.Errorf("smaxdb: %w", err)
	}
	var f smaxFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("smaxdb: %s: %w", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("smaxdb: %s: version %d, want 1", path, f.Version)
	}
	for i, e := range f.Cells {
		t, ok := parseCellType(e.Type)
		if !ok {
			return nil, fmt.Errorf("smaxdb: %s: cells[%d].type %q is not sub6, mmwave, lte or unknown", path, i, e.Type)
		}
		if e.ID == "" {
			return nil, fmt.Errorf("smaxdb: %s: cells[%d].id is empty", path, i)
		}
		if e.SMax <= 0 {
			return nil, fmt.Errorf("smaxdb: %s: cells[%d].smax_bytes %d is not positive", path, i, e.SMax)
		}
		k := cellKey{t, e.ID}
		if e.SMax > db.cells[k] {
			db.cells[k] = e.SMax
		}
	}
	return db, nil
}

// Observe records a burst of sb bytes in cell c; it reports whether ŝ_max
// of the cell grew. Cells without an ID are not recorded.
func (db *SMaxDB) Observe(c signaling.Cell, sb int) bool {
	if db == nil || c.ID == "" || sb <= 0 {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	k := cellKey{c.Type, c.ID}
	if sb <= db.cells[k] {
		return false
	}
	db.cells[k] = sb
	db.dirty = true
	return true
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
// known; for an mmWave target always the minimum known sub-6 value (bursts
// can't be seen on mmWave's unshared beams, and mmWave buffers are assumed
// no smaller than sub-6 ones); for an unknown cell the minimum of known
// cells of the same type, then of any sub-6 cell; else DefaultSMax.
func (db *SMaxDB) Lookup(target signaling.Cell) (int, SMaxSource) {
	if db == nil {
		return DefaultSMax, SMaxDefault
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if target.Type == signaling.CellMmWave {
		if v, ok := db.minWhere(func(t signaling.CellType) bool { return t.IsSub6() }); ok {
			return v, SMaxSub6ForMm
		}
		return DefaultSMax, SMaxDefault
	}
	if v, ok := db.cells[cellKey{target.Type, target.ID}]; ok && target.ID != "" {
		return v, SMaxKnown
	}
	if target.Type != signaling.CellUnknown {
		if v, ok := db.minWhere(func(t signaling.CellType) bool { return t == target.Type }); ok {
			return v, SMaxSameType
		}
	}
	if v, ok := db.minWhere(func(t signaling.CellType) bool { return t.IsSub6() }); ok {
		return v, SMaxAnyKnown
	}
	return DefaultSMax, SMaxDefault
}

func (db *SMaxDB) minWhere(keep func(signaling.CellType) bool) (int, bool) {
	m, found := 0, false
	for k, v := range db.cells {
		if keep(k.t) && (!found || v < m) {
			m, found = v, true
		}
	}
	return m, found
}

// Dirty reports whether the database changed since it was opened or saved.
func (db *SMaxDB) Dirty() bool {
	if db == nil {
		return false
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.dirty
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

// SMaxSnapshot is a copy of the database's cells, in the on-disk order,
// taken by Snapshot: it can be marshalled and written without the
// database's (or anyone's) lock, and handed back to MarkSaved.
type SMaxSnapshot struct {
	cells []smaxEntry
}

// Len is the number of cells in the snapshot.
func (s SMaxSnapshot) Len() int { return len(s.cells) }

// Snapshot copies the cells. It is cheap (one entry per cell visited) and
// does no I/O, so it may be taken under the packet path's lock; the slow
// part, SaveSnapshot, runs outside it.
func (db *SMaxDB) Snapshot() SMaxSnapshot {
	if db == nil {
		return SMaxSnapshot{}
	}
	db.mu.Lock()
	cells := make([]smaxEntry, 0, len(db.cells))
	for k, v := range db.cells {
		cells = append(cells, smaxEntry{ID: k.id, Type: cellTypeName(k.t), SMax: v})
	}
	db.mu.Unlock()
	sort.Slice(cells, func(i, j int) bool {
		if cells[i].Type != cells[j].Type {
			return cells[i].Type < cells[j].Type
		}
		return cells[i].ID < cells[j].ID
	})
	return SMaxSnapshot{cells: cells}
}

// MarkSaved records that snap is on disk: the database stays dirty only
// if a cell changed since the snapshot was taken.
func (db *SMaxDB) MarkSaved(snap SMaxSnapshot) {
	if db == nil {
		return
	}
	db.mu.Lock()
	db.dirty = !sameCells(db.cells, snap.cells)
	db.mu.Unlock()
}

// Save writes the database to its path (see SaveSnapshot) and marks what
// it wrote as saved.
func (db *SMaxDB) Save() error {
	if db == nil || db.path == "" {
		return nil
	}
	snap := db.Snapshot()
	if err := SaveSnapshot(db.path, snap); err != nil {
		return err
	}
	db.MarkSaved(snap)
	return nil
}

// SaveSnapshot writes snap to path atomically: a temporary file in the
// same directory, fsync, rename over the old file, fsync of the directory.
// A crash leaves either the old or the new file, never a torn one. It
// takes no lock.
func SaveSnapshot(path string, snap SMaxSnapshot) error {
	f := smaxFile{Version: 1, Cells: snap.cells}
	if f.Cells == nil {
		f.Cells = []smaxEntry{}
	}
	b, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return fmt.Errorf("smaxdb: %w", err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("smaxdb: %w", err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("smaxdb: saving %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("smaxdb: saving %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return fmt.Errorf("smaxdb: saving %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: makes the rename durable
		d.Close()
	}
	return nil
}

func sameCells(m map[cellKey]int, written []smaxEntry) bool {
	if len(m) != len(written) {
		return false
	}
	for _, e := range written {
		t, _ := parseCellType(e.Type)
		if m[cellKey{t, e.ID}] != e.SMax {
			return false
		}
	}
	return true
}
