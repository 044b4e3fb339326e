package endpoint_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestMain fails the run on leaked goroutines. With
// testutil.FakeServerEnv set, the test binary is instead the MCP server of
// a test's router.
func TestMain(m *testing.M) {
	testutil.BecomeFakeServer()
	testutil.Main(m)
}
