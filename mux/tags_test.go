package mux

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// taggedTransport is a session.Transport whose frames come in with tags, as
// an HTTP transport's POSTs do, and which records every frame written with
// its tag: what a transport with streams needs from the hub.
type taggedTransport struct {
	in   chan taggedFrame
	done chan struct{}
	once sync.Once

	mu  sync.Mutex
	out []outbox.Frame
}

type taggedFrame struct {
	data []byte
	tag  uint64
}

func newTaggedTransport() *taggedTransport {
	return &taggedTransport{in: make(chan taggedFrame, 16), done: make(chan struct{})}
}

func (t *taggedTransport) ReadFrame() ([]byte, uint64, error) {
	select {
	case f := <-t.in:
		return f.data, f.tag, nil
	case <-t.done:
		return nil, 0, net.ErrClosed
	}
}

func (t *taggedTransport) Buffered() bool { return len(t.in) > 0 }

func (t *taggedTransport) WriteFrames(frames []outbox.Frame) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range frames {
		t.out = append(t.out, outbox.Frame{Data: append([]byte(nil), f.Data...), Tag: f.Tag, Last: f.Last})
	}
	return nil
}

func (t *taggedTransport) TryWrite([]outbox.Frame) (bool, bool) { return false, false }

func (t *taggedTransport) Close() error {
	t.once.Do(func() { close(t.done) })
	return nil
}

func (t *taggedTransport) send(tag uint64, frame string) { t.in <- taggedFrame{[]byte(frame), tag} }

// written waits until n frames were written and returns them.
func (t *taggedTransport) written(tb testing.TB, n int) []outbox.Frame {
	tb.Helper()
	eventually(tb.(*testing.T), "frames written", func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return len(t.out) >= n
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]outbox.Frame(nil), t.out...)
}

// Every frame the hub sends about something that came in under a tag
// carries that tag: a request's progress and its answer (the last frame
// for it), a server request it caused, and, for a request cancelled
// without an answer, an end marker with no data.
func TestFramesCarryTheirRequestsTag(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ServerRequests = ServerRequestsSerialize })
	tr := newTaggedTransport()
	h.wg.Go(func() { h.hub.Serve(h.ctx, tr, session.Peer{Transport: "tagged"}) })
	t.Cleanup(func() { tr.Close() })

	tr.send(1, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}}}}`)
	tr.send(0, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	tr.send(2, `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"t"}}}`)
	frames := tr.written(t, 5)
	assert.Equal(t, outbox.Frame{Tag: 1, Last: true}, outbox.Frame{Tag: frames[0].Tag, Last: frames[0].Last}, "initialize's answer")
	for i, f := range frames[1:4] {
		assert.Equal(t, []any{uint64(2), false}, []any{f.Tag, f.Last}, "progress %d: %s", i, f.Data)
		assert.Contains(t, string(f.Data), `"progressToken":"t"`)
	}
	assert.Equal(t, []any{uint64(2), true}, []any{frames[4].Tag, frames[4].Last}, "the call's answer: %s", frames[4].Data)

	tr.send(3, `{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"sample"}}`)
	frames = tr.written(t, 6)
	ask, err := jsonrpc.Parse(frames[5].Data)
	require.NoError(t, err)
	assert.Equal(t, "sampling/createMessage", ask.Method)
	assert.Equal(t, []any{uint64(3), false}, []any{frames[5].Tag, frames[5].Last}, "the server's request goes with the call that caused it")
	tr.send(4, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"role":"assistant"}}`)
	frames = tr.written(t, 7)
	assert.Equal(t, []any{uint64(3), true, `"s"`}, []any{frames[6].Tag, frames[6].Last, idOf(t, frames[6].Data)})

	tr.send(5, `{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"hang"}}`)
	eventually(t, "the call in flight", func() bool { return h.Status().Inflight == 1 })
	tr.send(6, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h"}}`)
	frames = tr.written(t, 8)
	assert.Equal(t, outbox.Frame{Tag: 5, Last: true}, frames[7], "nothing more comes about the cancelled call")
}

func idOf(t *testing.T, frame []byte) string {
	m, err := jsonrpc.Parse(frame)
	require.NoError(t, err)
	return string(m.ID)
}
