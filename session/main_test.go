package session_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpmux/mcpmux/outbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// watchdogAfter is far beyond any one test's run, even under -race on a
// loaded machine.
const watchdogAfter = 2 * time.Minute

// watchdog dumps every goroutine's stack and ends the run if the test is
// still going after watchdogAfter: a hung session says more that way than
// through go test's own timeout, which comes much later.
func watchdog(t *testing.T) {
	w := time.AfterFunc(watchdogAfter, func() {
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "%s hung for %v; goroutines:\n%s\n", t.Name(), watchdogAfter, buf)
		os.Exit(2)
	})
	t.Cleanup(func() { w.Stop() })
}

// data makes frames of the given Data.
func data(frames ...string) []outbox.Frame {
	out := make([]outbox.Frame, len(frames))
	for i, f := range frames {
		out[i] = outbox.Frame{Data: []byte(f)}
	}
	return out
}
