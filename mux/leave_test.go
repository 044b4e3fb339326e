package mux

import (
	"testing"
)

// A session that leaves while its server is still starting is gone at
// once, not when its initialize would have stopped waiting.
func TestSessionLeavingWhileTheServerStarts(t *testing.T) {
	srv := newFakeServer()
	gate := make(chan struct{})
	srv.initGate = gate
	defer close(gate)
	h := newHarnessOn(t, srv, nil)
	c := h.connect()
	c.send(initLegacy)
	eventually(t, "the session counted", func() bool { return h.Status().Sessions == 1 })
	c.conn.Close()
	eventually(t, "the session gone", func() bool { return h.Status().Sessions == 0 })
}
