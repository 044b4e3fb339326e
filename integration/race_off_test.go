//go:build !race

package integration

// raceEnabled reports whether this test binary was built with -race; the
// daemon under test is then built with it too.
const raceEnabled = false
