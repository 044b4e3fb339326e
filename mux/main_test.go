package mux

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any of them leaves a goroutine
// behind: every goroutine the hub starts has an owner that waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
