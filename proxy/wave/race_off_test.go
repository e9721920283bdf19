//go:build !race

package wave

const raceEnabled = false
