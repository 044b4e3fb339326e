package mux

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// laterProc is the fake process with upstream.Process's SendLater and
// Flush: frames sent later wait, in one queue with those sent at once, until
// the next Flush or Send. So the hub's sessions hold their requests back as
// they do in front of a real server.
type laterProc struct {
	*fakeProc

	mu    sync.Mutex
	held  [][]byte
	later int // SendLater calls
}

func (p *laterProc) SendLater(frame []byte) error {
	if p.fakeProc.closed.Load() {
		return upstream.ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = append(p.held, frame)
	p.later++
	return nil
}

// Flush hands the held frames to the fake server, in order.
func (p *laterProc) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushLocked()
}

func (p *laterProc) flushLocked() {
	for _, f := range p.held {
		p.fakeProc.Send(f) // the fake's inbox is far larger than these tests fill
	}
	p.held = nil
}

// Send sends what was held first: one queue.
func (p *laterProc) Send(frame []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushLocked()
	return p.fakeProc.Send(frame)
}

func (p *laterProc) laterCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.later
}

// withLaterProcs makes the harness's server processes laterProcs, and
// records them.
func withLaterProcs(cfg *Config, procs *[]*laterProc, mu *sync.Mutex) {
	start := cfg.start
	cfg.start = func(c upstream.Config, h upstream.Handler) (process, error) {
		p, err := start(c, h)
		if err != nil {
			return nil, err
		}
		lp := &laterProc{fakeProc: p.(*fakeProc)}
		mu.Lock()
		*procs = append(*procs, lp)
		mu.Unlock()
		return lp, nil
	}
}

// A session at its MaxInflight with its requests held back for the server
// must send them before it waits for room, or it waits for answers to
// requests that never left: the six requests come in one write, so the
// session always has another line at hand.
func TestHeldRequestsSentBeforeWaitingForRoom(t *testing.T) {
	var (
		mu    sync.Mutex
		procs []*laterProc
	)
	h := newHarness(t, func(cfg *Config) {
		cfg.Session.MaxInflight = 2
		withLaterProcs(cfg, &procs, &mu)
	})
	c := h.session("2025-11-25")
	mu.Lock()
	require.Len(t, procs, 1, "one server started")
	proc := procs[0]
	mu.Unlock()
	before := proc.laterCalls()

	const n = 6
	var all strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&all, `{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"i":%d}}`+"\n", i, i)
	}
	_, err := c.conn.Write([]byte(all.String())) // one write: all six at hand at once
	require.NoError(t, err)

	var got []string
	for range n {
		frame, err := c.recvFrame()
		require.NoError(t, err, "answer %d of %d (got %v): the session waits for room while its requests are held", len(got)+1, n, got)
		m, err := jsonrpc.Parse(frame)
		require.NoError(t, err)
		got = append(got, string(m.ID)+" "+string(m.Result))
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf(`%d {"params":{"i":%d}}`, i+1, i+1)
	}
	assert.Equal(t, want, got, "answers, in the order of the requests")
	assert.Equal(t, n, proc.laterCalls()-before, "the requests went up with SendLater (the path under test)")
}

// replyRun plays a server whose stdout carries a run of messages that the
// reader finds buffered together: each is handled, then one Flush.
func (p *fakeProc) replyRun(frames ...[]byte) {
	p.replyMu.Lock()
	defer p.replyMu.Unlock()
	for _, f := range frames {
		m, err := jsonrpc.Parse(f)
		if err != nil {
			panic(err)
		}
		p.h.HandleMessage(m)
	}
	p.h.Flush()
}

// A run of answers to several sessions, interleaved, is held per session
// and flushed at the end of the run: every session gets all of its own, in
// order.
func TestRunOfAnswersReachesEverySession(t *testing.T) {
	h := newHarness(t, nil)
	a := h.session("2025-11-25")
	b := h.session("2025-11-25")
	// Requests the fake never answers; the test answers them below.
	for i := 1; i <= 3; i++ {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"a%d","method":"hang","params":{"who":"a%d"}}`, i, i))
		b.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"b%d","method":"hang","params":{"who":"b%d"}}`, i, i))
	}
	eventually(t, "six requests upstream", func() bool { return len(h.srv.messages("hang")) == 6 })
	up := map[string]json.RawMessage{} // who -> upstream id
	for _, m := range h.srv.messages("hang") {
		var p struct{ Who string }
		require.NoError(t, json.Unmarshal(m.Params, &p))
		up[p.Who] = m.ID
	}
	var run [][]byte
	for i := 1; i <= 3; i++ {
		for _, who := range []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)} {
			run = append(run, jsonrpc.Response(up[who], json.RawMessage(`{"who":"`+who+`"}`)))
		}
	}
	h.srv.current().replyRun(run...)

	for _, s := range []struct {
		name string
		c    *testClient
	}{{"a", a}, {"b", b}} {
		var got []string
		for range 3 {
			m := s.c.answer()
			got = append(got, string(m.ID)+" "+string(m.Result))
		}
		want := make([]string, 3)
		for i := range want {
			who := fmt.Sprintf("%s%d", s.name, i+1)
			want[i] = fmt.Sprintf(`"%s" {"who":"%s"}`, who, who)
		}
		assert.Equal(t, want, got, "session %s's answers", s.name)
	}

	// The held list starts afresh: a lone answer later still goes out.
	a.send(`{"jsonrpc":"2.0","id":"after","method":"echo"}`)
	assert.Equal(t, `"after"`, string(a.answer().ID))
}
