package bridge

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestMain fails the package's tests if any of them leaves a goroutine
// behind.
func TestMain(m *testing.M) { testutil.Main(m) }
