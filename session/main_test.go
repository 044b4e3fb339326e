package session_test

import (
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/outbox"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// watchdogAfter is far beyond any one test's run, even under -race on a
// loaded machine.
const watchdogAfter = 2 * time.Minute

// watchdog dumps every goroutine's stack and ends the run if the test is
// still going after watchdogAfter: a hung session says more that way than
// through go test's own timeout, which comes much later.
func watchdog(t *testing.T) {
	stop := testutil.Watchdog(watchdogAfter, t.Name()+" hung", nil)
	t.Cleanup(func() { stop() })
}

// data makes frames of the given Data.
func data(frames ...string) []outbox.Frame {
	out := make([]outbox.Frame, len(frames))
	for i, f := range frames {
		out[i] = outbox.Frame{Data: []byte(f)}
	}
	return out
}
