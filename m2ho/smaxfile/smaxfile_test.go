package smaxfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

func cell(t signaling.CellType, id string) signaling.Cell { return signaling.Cell{Type: t, ID: id} }

const (
	sub6 = signaling.CellSub6
	lte  = signaling.CellLTE
)

func TestSMaxPersistence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "smax.json")
	db, err := Open(path) // missing file: empty db
	if err != nil || db.Len() != 0 {
		t.Fatalf("open missing: %v %d", err, db.Len())
	}
	db.Observe(cell(sub6, "A"), 300000)
	db.Observe(cell(lte, "L"), 400000)
	if err := SaveDB(path, db); err != nil {
		t.Fatal(err)
	}
	if db.Dirty() {
		t.Fatal("dirty after save")
	}
	re, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, src := re.Lookup(cell(sub6, "A")); v != 300000 || src != m2ho.SMaxKnown {
		t.Fatalf("reopened: %d %v", v, src)
	}
	if v, _ := re.Get(cell(lte, "L")); v != 400000 || re.Dirty() {
		t.Fatalf("reopened lte: %d dirty=%v", v, re.Dirty())
	}
	// A second save replaces the file and leaves no temporary behind.
	re.Observe(cell(sub6, "A"), 350000)
	if err := SaveDB(path, re); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "smax.json" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v", names)
	}
	re2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := re2.Get(cell(sub6, "A")); v != 350000 {
		t.Fatalf("after second save %d", v)
	}
	// A save into a directory that does not exist fails and writes nothing.
	bad := m2ho.NewSMaxDB()
	bad.Observe(cell(sub6, "A"), 1)
	if err := SaveDB(filepath.Join(dir, "no", "such", "smax.json"), bad); err == nil || !bad.Dirty() {
		t.Fatalf("save into missing dir: err=%v dirty=%v", err, bad.Dirty())
	}
}

func TestSMaxOpenErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, body, want string }{
		{"not json", "{", "unexpected end"},
		{"bad version", `{"version":2,"cells":[]}`, "version 2"},
		{"bad type", `{"version":1,"cells":[{"id":"a","type":"wifi","smax_bytes":1}]}`, "cells[0].type"},
		{"empty id", `{"version":1,"cells":[{"id":"","type":"sub6","smax_bytes":1}]}`, "cells[0].id"},
		{"zero smax", `{"version":1,"cells":[{"id":"a","type":"sub6","smax_bytes":5},{"id":"b","type":"lte","smax_bytes":0}]}`, "cells[1].smax_bytes"},
		{"full burst estimate", `{"version":1,"cells":[{"id":"a","type":"sub6","smax_bytes":5,"full":true}]}`, "cells[0].full without measured"},
	}
	for _, tc := range tests {
		p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
		os.WriteFile(p, []byte(tc.body), 0o644)
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: error %v, want one naming %s and %q", tc.name, err, p, tc.want)
		}
	}
}

// FuzzOpen: any file either fails to open with an error or opens to a
// database that saves and reopens to the same contents.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"version":1,"cells":[{"id":"a","type":"sub6","smax_bytes":5}]}`))
	f.Add([]byte(`{"version":1,"cells":[{"id":"a","type":"lte","smax_bytes":5},{"id":"a","type":"lte","smax_bytes":9}]}`))
	f.Add([]byte(`{"version":1,"cells":[{"id":"a","type":"sub6","smax_bytes":5,"measured":true,"full":true},{"id":"a","type":"sub6","smax_bytes":9,"measured":true}]}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "db.json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Open(p)
		if err != nil {
			return
		}
		n := db.Len()
		if err := SaveDB(p, db); err != nil {
			t.Fatal(err)
		}
		re, err := Open(p)
		if err != nil {
			t.Fatalf("reopening a saved db: %v", err)
		}
		if re.Len() != n {
			t.Fatalf("cells %d after reopen, want %d", re.Len(), n)
		}
	})
}
