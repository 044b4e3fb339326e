package mux

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/upstream"
)

// A call to a process that is on its way out says how the process ended,
// once, and names the request: the reason (junk on stdout, say) is what
// the user needs, not that the pipe was closing.
func TestCallToAnEndingProcessSaysHowItEnded(t *testing.T) {
	h := newHarness(t, nil)
	p := &fakeProc{done: make(chan struct{}), exit: upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonJunkOutput}}
	p.closed.Store(true)
	close(p.done)
	_, err := h.hub.call(t.Context(), p, "initialize", nil)
	assert.EqualError(t, err, "initialize: server exited (signal: killed (junk_output))")
}
