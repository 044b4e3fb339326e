// Package testutil holds the helpers that the tests of mcpmux's packages and
// of the integration module share, so that each exists once: the TestMain
// that fails a run on goroutines left behind, a watchdog that prints every
// stack when a run hangs, polling a condition up to a deadline (never a
// sleep that guesses how long something takes), a buffer that a process's
// output copier may fill while a test reads it, short folders for Unix
// sockets, a scripted MCP server that a test binary becomes, the check that
// every package says what it owns, the check that a package's doc names
// every function that starts a goroutine or a timer, the check that a
// package's locks are leaves, and the check that every unlock in the
// module is deferred.
//
// Only _test.go files import it (the integration module's too: its path is
// inside mcpmux's, so Go lets it). Of the libraries it uses only goleak is
// not the standard library's; mcpmux's tests use it already. The lock check
// runs the go command (go list) for the packages' types.
package testutil
