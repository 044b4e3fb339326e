package main

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestMain fails the run on goroutines the tests leave behind, as every
// package's does.
func TestMain(m *testing.M) { testutil.Main(m) }
