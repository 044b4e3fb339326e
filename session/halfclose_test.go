//go:build unix

package session_test

import (
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// laterAnswers is a handler hook that counts each request into flight and
// answers it once the test says so, from a goroutine of the test's, as the
// hub answers from the server's reader.
type laterAnswers struct {
	mu      sync.Mutex
	pending []*jsonrpc.Message
	sess    *session.Session
	wg      sync.WaitGroup
}

func (l *laterAnswers) onMessage(s *session.Session, m *jsonrpc.Message) {
	if m.Kind != jsonrpc.KindRequest {
		return
	}
	s.Begin()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sess, l.pending = s, append(l.pending, m)
}

func (l *laterAnswers) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// answerAll answers every pending request, each then counted out of
// flight, as the hub does it.
func (l *laterAnswers) answerAll() {
	l.mu.Lock()
	ms, s := l.pending, l.sess
	l.pending = nil
	l.mu.Unlock()
	l.wg.Go(func() {
		for _, m := range ms {
			s.Send(outbox.Frame{Data: jsonrpc.Response(m.ID, json.RawMessage(`"late"`)), Last: true})
			s.End()
		}
	})
}

// TestHalfClosedClientGetsAnswersInFlight: a client that writes its
// requests and shuts down its writing side (printf ... | nc -U) gets the
// answers of every request it sent, even those answered after the EOF.
func TestHalfClosedClientGetsAnswersInFlight(t *testing.T) {
	var later laterAnswers
	defer later.wg.Wait()
	h := newFakeHandler()
	h.onMessage = later.onMessage
	hs := start(t, connType{"socketpair", socketPair}, session.Config{}, h, 0)
	uc := hs.client.(*net.UnixConn)
	for i := range 3 {
		_, err := uc.Write([]byte(request(fmt.Sprint(i), "slow") + "\n"))
		require.NoError(t, err)
	}
	for i := range 3 {
		h.nextMessage(t, fmt.Sprintf("request %d", i))
	}
	require.NoError(t, uc.CloseWrite())
	h.none(t, "nothing after the EOF")
	select {
	case <-hs.sess.Done():
		require.FailNow(t, "the session ended with its requests in flight")
	default:
	}
	later.answerAll()
	for i := range 3 {
		assert.Equal(t, answer{JSONRPC: "2.0", ID: fmt.Sprint(i), Result: `"late"`}, hs.readAnswer(fmt.Sprintf("answer %d", i)))
	}
	hs.drainToEOF("the last answer")
	assert.NoError(t, hs.wait("the answers were delivered"))
	assert.ErrorIs(t, hs.sess.Err(), session.ErrHalfClosed)
}

// TestClosedClientEndsWithRequestsInFlight: a client that closes its
// connection altogether cannot read an answer: the session ends at once,
// its requests in flight left to the hub to cancel.
func TestClosedClientEndsWithRequestsInFlight(t *testing.T) {
	var later laterAnswers
	h := newFakeHandler()
	h.onMessage = later.onMessage
	hs := start(t, connType{"socketpair", socketPair}, session.Config{}, h, 0)
	hs.send(request(`1`, "slow"))
	h.nextMessage(t, "the request")
	require.NoError(t, hs.client.Close())
	began := time.Now()
	assert.NoError(t, hs.wait("the client closed"))
	assert.Less(t, time.Since(began), 2*time.Second, "the session ended at once")
	assert.NotErrorIs(t, hs.sess.Err(), session.ErrHalfClosed, "a close is not a half-close")
	assert.Equal(t, 1, later.count(), "the request was still in flight")
}

// TestHalfClosedDrainIsBounded: answers that do not come within
// DrainTimeout do not hold a half-closed session open.
func TestHalfClosedDrainIsBounded(t *testing.T) {
	var later laterAnswers
	h := newFakeHandler()
	h.onMessage = later.onMessage
	hs := start(t, connType{"socketpair", socketPair}, session.Config{DrainTimeout: 300 * time.Millisecond}, h, 0)
	uc := hs.client.(*net.UnixConn)
	_, err := uc.Write([]byte(request(`1`, "never") + "\n"))
	require.NoError(t, err)
	h.nextMessage(t, "the request")
	require.NoError(t, uc.CloseWrite())
	began := time.Now()
	assert.NoError(t, hs.wait("the drain timeout"))
	took := time.Since(began)
	assert.GreaterOrEqual(t, took, 300*time.Millisecond, "the session waited for the answer")
	assert.Less(t, took, 5*time.Second, "and no longer than the drain timeout and the flush")
	hs.drainToEOF("the drain timeout")
}
