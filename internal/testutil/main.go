package testutil

import (
	"fmt"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main is a TestMain that runs the tests and fails the run on goroutines
// still running after they passed:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run runs the tests and returns the exit code for os.Exit: m.Run's, or 1
// when the tests passed but goroutines they started are still running
// (goleak.Find waits a while for them to end first). It is for a TestMain
// with cleanup to do before it exits.
func Run(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "testutil: the tests passed but left goroutines running:", err)
		return 1
	}
	return code
}

// Watchdog ends a run that hangs, and says where: unless stop is called
// first, after d it prints what, then every goroutine's stack, calls also
// (when not nil: to ask child processes for their stacks, say) and exits
// with status 2. Set d well below go test's -timeout, so that what the
// watchdog prints comes first.
func Watchdog(d time.Duration, what string, also func()) (stop func() bool) {
	t := time.AfterFunc(d, func() {
		fmt.Fprintf(os.Stderr, "%s: no end after %v; goroutines:\n", what, d)
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		if also != nil {
			also()
		}
		os.Exit(2)
	})
	return t.Stop
}
