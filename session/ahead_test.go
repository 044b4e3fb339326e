//go:build unix

package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
)

// A handler that waits (for a server that starts) holds up the reading;
// Await still sees the client leave, and ends the wait at once.
func TestAwaitSeesTheClientLeave(t *testing.T) {
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			ended := make(chan error, 1)
			h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
				ended <- s.Await(t.Context(), func(ctx context.Context) error {
					<-ctx.Done()
					return context.Cause(ctx)
				})
			}
			hs := start(t, ct, session.Config{}, h, 0)
			hs.send(request(`1`, "wait"))
			h.nextMessage(t, "the request that waits")
			require.NoError(t, hs.client.Close())
			select {
			case err := <-ended:
				assert.Error(t, err, "the wait ends with the reason the client is gone")
			case <-time.After(waitLong):
				require.FailNow(t, "Await did not see the client leave")
			}
			select {
			case err := <-hs.runErr:
				assert.NoError(t, err, "a client that left is a plain end")
				hs.runErr <- err // for the cleanup
			case <-time.After(waitLong):
				require.FailNow(t, "the session did not end")
			}
		})
	}
}

// The frame Await read ahead is the read loop's next, in order.
func TestAwaitKeepsTheFrameItReadAhead(t *testing.T) {
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			release := make(chan struct{})
			var waited error
			h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
				if m.Method != "wait" {
					return
				}
				waited = s.Await(t.Context(), func(ctx context.Context) error {
					select {
					case <-release:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				})
			}
			hs := start(t, ct, session.Config{}, h, 0)
			hs.send(request(`1`, "wait"), request(`2`, "next"), request(`3`, "last"))
			assert.Equal(t, "wait", h.nextMessage(t, "the request that waits").Method)
			h.none(t, "nothing is handled while the handler waits")
			close(release)
			assert.Equal(t, "next", h.nextMessage(t, "the frame read ahead").Method)
			assert.Equal(t, "last", h.nextMessage(t, "the one after it").Method)
			assert.NoError(t, waited, "the wait was not cut short: a frame is no leaving")
		})
	}
}
