package mux

import (
	"os"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestMain fails the package's tests if any of them leaves a goroutine
// behind: every goroutine the hub starts has an owner that waits for it.
// With bigServerEnv set, the test binary is instead the server of
// BenchmarkLargeAnswer.
func TestMain(m *testing.M) {
	if size := os.Getenv(bigServerEnv); size != "" {
		os.Exit(runBigServer(size))
	}
	testutil.Main(m)
}
