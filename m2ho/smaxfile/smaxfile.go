// Package smaxfile keeps the M2HO controller's ŝ_max database (M2HO
// MobiCom'24 §4.3) in a file across restarts. The database itself
// (m2ho.SMaxDB) is pure; this is its only I/O: a read at start and atomic
// writes of snapshots, done outside the packet path's lock.
package smaxfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/m2ho/m2ho/m2ho"
)

// Open reads the database at path; a missing file is an empty database
// that Save will create.
func Open(path string) (*m2ho.SMaxDB, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m2ho.NewSMaxDB(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("smaxdb: %w", err)
	}
	db, err := m2ho.UnmarshalSMaxDB(b)
	if err != nil {
		return nil, fmt.Errorf("smaxdb: %s: %w", path, err)
	}
	return db, nil
}

// Save writes snap to path atomically: a temporary file in the same
// directory, fsync, rename over the old file, fsync of the directory. A
// crash leaves either the old or the new file, never a torn one. It may
// take as long as the disk does: call it outside any lock the packet path
// needs.
func Save(path string, snap m2ho.SMaxSnapshot) error {
	b, err := snap.Marshal()
	if err != nil {
		return fmt.Errorf("smaxdb: %w", err)
	}
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

// SaveDB snapshots db, saves the snapshot to path and, when that
// succeeded, marks what was written clean (db.Saved). Changes made while
// the file was written keep db dirty.
func SaveDB(path string, db *m2ho.SMaxDB) error {
	if db == nil {
		return nil
	}
	snap := db.Snapshot()
	if err := Save(path, snap); err != nil {
		return err
	}
	db.Saved(snap)
	return nil
}
