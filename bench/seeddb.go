package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/m2ho/m2ho/m2ho"
)

// readSeedDB reads and checks the database every run's proxy starts from
// (Config.SeedDB), so that a bad file fails the bench at once, not in the
// first run's proxy; it returns the bytes and their SHA-256 for the
// settings. A path "" is no seed.
func readSeedDB(path string) ([]byte, string, error) {
	if path == "" {
		return nil, "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("--seed-db: %w", err)
	}
	if _, err := m2ho.UnmarshalSMaxDB(b); err != nil {
		return nil, "", fmt.Errorf("--seed-db: %s: %w", path, err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}
