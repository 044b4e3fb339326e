//go:build unix

package session_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// runStream runs a session over one end of a pair, with the stream's line
// timeout and cfg, and returns the client's reader and writer and Run's
// result.
func runStream(t *testing.T, pair func(testing.TB) (net.Conn, net.Conn), cfg session.Config, lineTimeout time.Duration, h session.Handler) (*session.Session, *bufio.Reader, func(string), <-chan error) {
	t.Helper()
	watchdog(t)
	server, client := pair(t)
	st := session.NewStream(server, 1<<20)
	st.SetLineTimeout(lineTimeout)
	sess := session.New(cfg, st)
	ran, finished := make(chan error, 1), make(chan struct{})
	go func() { // waited for at cleanup
		defer close(finished)
		ran <- sess.Run(t.Context(), h)
	}()
	t.Cleanup(func() {
		client.Close()
		<-finished
	})
	write := func(s string) {
		_, err := client.Write([]byte(s))
		require.NoError(t, err)
	}
	client.SetReadDeadline(time.Now().Add(waitLong))
	return sess, bufio.NewReader(client), write, ran
}

// A client may stay silent between messages for as long as it likes, and
// may send a message in pieces within the line timeout; one that stops in
// the middle of a message past it is closed with ErrStalledLine.
func TestLineTimeoutClosesAStalledSession(t *testing.T) {
	const timeout = 300 * time.Millisecond
	h := newFakeHandler()
	h.onMessage = echo
	_, br, write, ran := runStream(t, socketPair, session.Config{}, timeout, h)

	write(request("1", "ping") + "\n")
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, `"id":1`)

	quiet := time.NewTimer(2 * timeout) // silence between messages: no limit
	<-quiet.C
	half := request("2", "ping")
	write(half[:10])
	write(half[10:] + "\n" + `{"jsonrpc":"2.0","id":3,"method":"p`)
	line, err = br.ReadString('\n')
	require.NoError(t, err, "a message in two pieces is read")
	assert.Contains(t, line, `"id":2`)

	began := time.Now()
	select {
	case err := <-ran:
		assert.ErrorIs(t, err, session.ErrStalledLine)
		assert.GreaterOrEqual(t, time.Since(began), timeout/2)
	case <-time.After(waitLong):
		require.FailNow(t, "a session stalled mid-message was not closed")
	}
}

// sized answers every request with a result of the size its method
// names: "big" 600 KiB, "bigger" 700 KiB, anything else 100 bytes.
func sized(s *session.Session, m *jsonrpc.Message) {
	if m.Kind != jsonrpc.KindRequest {
		return
	}
	n := map[string]int{"big": 600 << 10, "bigger": 700 << 10}[m.Method]
	s.Send(outbox.Frame{Data: result(string(m.ID), max(n, 100))})
}

// Sessions share a budget of 1 MiB over net.Pipe, where an answer stays
// queued until its client reads it. A's client leaves 700 KiB unread, C's
// then 600 KiB: the sum passes the budget, and A, which holds the most
// (not C, whose answer passed it), is evicted with ErrOverBudget; the
// budget then holds C's alone, and B, which reads, is answered throughout.
func TestBudgetEvictsTheSessionHoldingTheMost(t *testing.T) {
	budget := outbox.NewBudget(1 << 20)
	cfg := session.Config{OutboxHighWater: 4 << 20, OutboxMax: 8 << 20, Budget: budget}
	type peer struct {
		br    *bufio.Reader
		write func(string)
		ran   <-chan error
	}
	var ps []peer
	for range 3 {
		h := newFakeHandler()
		h.onMessage = sized
		_, br, write, ran := runStream(t, pipePair, cfg, 0, h)
		ps = append(ps, peer{br, write, ran})
	}
	a, b, c := ps[0], ps[1], ps[2]
	a.write(request("1", "bigger") + "\n")
	testutil.Until(t, waitLong, "A's answer queued", func() bool { return budget.Queued() >= 700<<10 })
	c.write(request("1", "big") + "\n")
	select {
	case err := <-a.ran:
		assert.ErrorIs(t, err, session.ErrOverBudget)
	case <-time.After(waitLong):
		require.FailNow(t, "the session holding the most was not evicted")
	}
	testutil.Until(t, waitLong, "A's bytes leave the budget", func() bool { return budget.Queued() < 1<<20 })
	assert.GreaterOrEqual(t, budget.Queued(), 600<<10, "C's answer stays")
	b.write(request("2", "small") + "\n")
	line, err := b.br.ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, line, `"id":2`)
	select {
	case err := <-c.ran:
		require.FailNow(t, "C was evicted too", "%v", err)
	default:
	}
}
