//go:build race

package mux

// raceEnabled reports whether this test binary was built with -race.
const raceEnabled = true
