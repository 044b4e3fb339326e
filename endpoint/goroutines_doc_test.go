package endpoint_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestGoroutinesDocumented keeps the package doc's Goroutines section true:
// every function that starts a goroutine or a timer is named there.
func TestGoroutinesDocumented(t *testing.T) { testutil.CheckGoroutineDocs(t, ".") }
