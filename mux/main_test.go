package mux

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestMain fails the package's tests if any of them leaves a goroutine
// behind: every goroutine the hub starts has an owner that waits for it.
func TestMain(m *testing.M) { testutil.Main(m) }
