package main

import (
	"os"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestMain fails the run on goroutines the tests leave behind, as every
// package's does. With fakeServerEnv set, the test binary is instead the
// MCP server of a test's daemon (see runFakeServer).
func TestMain(m *testing.M) {
	if os.Getenv(fakeServerEnv) != "" {
		os.Exit(runFakeServer(os.Stdin, os.Stdout, os.Stderr))
	}
	testutil.Main(m)
}
