package main

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestMain fails the run on goroutines the tests leave behind, as every
// package's does. With testutil.FakeServerEnv set, the test binary is
// instead the MCP server of a test's daemon (see fakeServerTable).
func TestMain(m *testing.M) {
	testutil.BecomeFakeServer()
	testutil.Main(m)
}
