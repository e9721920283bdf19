package smaxfile

import (
	"path/filepath"
	"testing"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// A snapshot is a copy: writing it needs no database (so no lock), a change
// after it keeps the database dirty, and the file holds exactly the
// snapshot.
func TestSnapshotSavedOutsideTheDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "smax.json")
	db := m2ho.NewSMaxDB()
	a := signaling.Cell{Type: signaling.CellSub6, ID: "a"}
	b := signaling.Cell{Type: signaling.CellLTE, ID: "b"}
	db.Observe(a, 100_000)
	snap := db.Snapshot()
	db.Observe(b, 50_000) // after the snapshot: not in it
	if err := Save(path, snap); err != nil {
		t.Fatal(err)
	}
	db.Saved(snap)
	if !db.Dirty() {
		t.Error("b changed after the snapshot, yet the database is clean")
	}
	got, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Get(a); !ok || v != 100_000 || got.Len() != 1 {
		t.Errorf("file holds %d cells, a=%d (%v); want exactly the snapshot", got.Len(), v, ok)
	}
	snap = db.Snapshot()
	if err := Save(path, snap); err != nil {
		t.Fatal(err)
	}
	db.Saved(snap)
	if db.Dirty() {
		t.Error("dirty after saving a snapshot of the current cells")
	}
	// An empty database saves as an empty list, which opens again.
	if err := Save(path, m2ho.NewSMaxDB().Snapshot()); err != nil {
		t.Fatal(err)
	}
	if got, err := Open(path); err != nil || got.Len() != 0 {
		t.Errorf("empty snapshot: %v, %d cells", err, got.Len())
	}
}
