package mux_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestEveryLockIsALeaf reads the package's own source, with the module's
// packages it calls into, and holds the package doc's "Locks" to its word:
// no lock is taken while another is held (but for the table flights
// holds), nothing that may block or write
// runs under one, and every unlock is deferred. (A lock released by a plain
// call is released only if nothing between Lock and Unlock panics, and a
// panic recovered at the session boundary would leave it held for every
// other session of the server.)
func TestEveryLockIsALeaf(t *testing.T) {
	testutil.CheckLocks(t, ".", testutil.LockRules{
		Allowed: map[string]string{
			"(log/slog.Handler).Handle":                  "teeHandler.format: slog's text handler writes the line into the tee's own buffer, in memory",
			"(github.com/mcpmux/mcpmux/mux.process).Pid": "a field read (upstream.Process.Pid)",
			"Projects.startLocked":                       "New takes the new hub's own locks, which nothing else can hold yet",
			"Pool.startLocked":                           "New takes the new hub's own locks, which nothing else can hold yet",
			"s.hook":                                     "set by tests only, to act inside subscriptions.add's critical section",
		},
		Order:         [][2]string{{"mux.flights", "idmap.Table"}},
		CallUnderLock: []string{"(*github.com/mcpmux/mcpmux/mux.flights).latest"},
	}, 21)
}
