//go:build race

package tunnel

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = true
