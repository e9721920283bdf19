package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A seed database that is missing or not a database fails the bench at
// once, naming the flag, the file and what is wrong.
func TestReadSeedDB(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"version":1,"cells":[{"id":"A","type":"sub6","smax_bytes":100000}]}`), 0o644)
	b, sum, err := readSeedDB(good)
	if err != nil || len(b) == 0 || len(sum) != 64 {
		t.Fatalf("good file: %d bytes, sha256 %q, %v", len(b), sum, err)
	}
	if b, sum, err := readSeedDB(""); err != nil || b != nil || sum != "" {
		t.Fatalf("no seed: %q %q %v", b, sum, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version":1,"cells":[],"answers":[{"report":"nr-a9","serving":"mmwave","answered":0,"unanswered":1}]}`), 0o644)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.json"), "missing.json"},
		{bad, "bad.json: answers[0].report"},
	} {
		if _, _, err := readSeedDB(tc.path); err == nil || !strings.Contains(err.Error(), "--seed-db") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want --seed-db and %q", tc.path, err, tc.want)
		}
	}
}
