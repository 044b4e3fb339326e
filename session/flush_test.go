//go:build unix

package session_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// runSession runs sess with h until the test ends; the returned stop (also
// a cleanup) cancels it and waits for Run. Run's result is not checked:
// the tests here look at what reached the client.
func runSession(t *testing.T, sess *session.Session, h session.Handler) (stop func()) {
	t.Helper()
	watchdog(t)
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- sess.Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-runErr:
			case <-time.After(waitLong):
				t.Errorf("Run did not return %v after its context was cancelled", waitLong)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// holdingHandler does with a session's requests what the hub does: it
// counts each into flight and holds it back, and only Flush hands the held
// run on, here to a fake server that answers each one. The session calls
// its methods on its read goroutine only.
type holdingHandler struct {
	held    []*jsonrpc.Message
	forward chan *jsonrpc.Message // to the fake server; sized so it never fills
	runs    []int                 // how many requests each Flush handed on, when any
}

func (h *holdingHandler) HandleMessage(s *session.Session, m *jsonrpc.Message, _ uint64) {
	s.Begin()
	h.held = append(h.held, m)
}

func (h *holdingHandler) HandleBatch(*session.Session, []byte, uint64) {}
func (h *holdingHandler) WaitRoom(context.Context) error               { return nil }

func (h *holdingHandler) Flush() {
	if len(h.held) == 0 {
		return
	}
	h.runs = append(h.runs, len(h.held))
	for _, m := range h.held {
		h.forward <- m
	}
	h.held = h.held[:0]
}

// TestFlushBeforeWaitingForRoom is the deadlock the session's reader must
// avoid: with MaxInflight requests held back by the handler, the session
// has no room, and the answers that would make room can only come once the
// held requests are sent. All six requests arrive in one write, so the
// transport always has a whole line buffered: only the "no room" condition
// makes the session flush before it waits.
func TestFlushBeforeWaitingForRoom(t *testing.T) {
	const requests, maxInflight = 6, 2
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			server, client := ct.pair(t)
			var all []byte
			for i := 1; i <= requests; i++ {
				all = append(append(all, request(fmt.Sprint(i), "work")...), '\n')
			}
			require.Less(t, len(all), 4<<10, "precondition: one read of the session's reader takes all of them")
			// One write; net.Pipe blocks until the session reads, so it goes
			// from a goroutine the test waits for.
			var writer sync.WaitGroup
			var writeErr error
			writer.Go(func() { _, writeErr = client.Write(all) })
			defer func() {
				client.Close() // unblocks the write if the session never read
				writer.Wait()
			}()

			h := &holdingHandler{forward: make(chan *jsonrpc.Message, requests)}
			sess := session.New(session.Config{MaxInflight: maxInflight}, session.NewStream(server, 1<<20))
			var srv sync.WaitGroup
			srv.Go(func() { // the fake server: answers each request it is handed
				for m := range h.forward {
					sess.Send(outbox.Frame{Data: jsonrpc.Response(m.ID, json.RawMessage(`"ok"`))})
					sess.End()
				}
			})
			stop := runSession(t, sess, h)
			defer func() {
				stop() // no Flush after this, so forward can close
				close(h.forward)
				srv.Wait()
			}()

			br := bufio.NewReader(client)
			require.NoError(t, client.SetReadDeadline(time.Now().Add(waitLong)))
			var got []answer
			for i := range requests {
				line, err := br.ReadBytes('\n')
				require.NoError(t, err, "answer %d of %d: the session waits for room while it holds the requests that would make it", i+1, requests)
				got = append(got, decodeAnswer(t, line[:len(line)-1]))
			}
			want := make([]answer, requests)
			for i := range want {
				want[i] = answer{JSONRPC: "2.0", ID: fmt.Sprint(i + 1), Result: `"ok"`}
			}
			assert.Equal(t, want, got, "answers, in the order of the requests")
			writer.Wait()
			require.NoError(t, writeErr)

			stop()
			total := 0
			for _, n := range h.runs {
				assert.LessOrEqual(t, n, maxInflight, "a held run larger than MaxInflight: the session read on without room (runs %v)", h.runs)
				total += n
			}
			assert.Equal(t, requests, total, "requests handed on (runs %v)", h.runs)
		})
	}
}

// TestHalfClosedClientsLastFlushRacesFlush: a client that half-closes gets,
// in the session's last flush, what was queued for it, while answers keep
// being flushed into the session from another goroutine, as the server's
// reader does (the last flush once raced such a Flush over the transport's
// buffers). What arrives is whole and in order, and holds every frame that
// was queued before the half-close.
func TestHalfClosedClientsLastFlushRacesFlush(t *testing.T) {
	const limit = 100_000 // frames at most: far under OutboxMax
	server, client := socketPair(t)
	sess := session.New(session.Config{OutboxHighWater: 32 << 20, OutboxMax: 64 << 20}, session.NewStream(server, 1<<20))
	runSession(t, sess, newFakeHandler())

	var queued atomic.Int64
	var producer sync.WaitGroup
	producer.Go(func() { // ends once the session refuses: it has ended
		for i := range limit {
			if sess.SendLater(outbox.Frame{Data: fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, strings.Repeat("p", i%200))}) != nil {
				return
			}
			queued.Add(1)
			if i%4 == 3 {
				sess.Flush()
			}
		}
		sess.Flush()
	})
	defer producer.Wait()
	type result struct {
		b   []byte
		err error
	}
	read := make(chan result, 1)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(waitLong)))
	go func() { // the client reads to EOF: the session closes after its last flush
		b, err := io.ReadAll(client)
		read <- result{b, err}
	}()
	require.Eventually(t, func() bool { return queued.Load() >= 2000 }, waitLong, time.Millisecond, "the producer got going")
	before := queued.Load()
	require.NoError(t, client.(*net.UnixConn).CloseWrite())

	res := <-read // bounded by the read deadline
	require.NoError(t, res.err, "the client reads to EOF")
	lines := bytes.Split(bytes.TrimSuffix(res.b, []byte{'\n'}), []byte{'\n'})
	for i, line := range lines {
		var f struct {
			I   int
			Pad string
		}
		require.NoError(t, json.Unmarshal(line, &f), "line %d: a torn or interleaved frame: %.100q", i, line)
		require.Equal(t, i, f.I, "line %d: frames lost or out of order", i)
		require.Len(t, f.Pad, i%200, "line %d", i)
	}
	assert.GreaterOrEqual(t, int64(len(lines)), before, "every frame queued before the half-close arrives")
	assert.ErrorIs(t, sess.Err(), io.EOF)
}

// tagTransport is a Transport whose frames come with tags, as a transport
// with streams reads them; what the session writes is kept.
type tagTransport struct {
	in     chan tagged // closed: the client hung up
	closed chan struct{}
	once   sync.Once

	mu  sync.Mutex
	out []outbox.Frame
}

type tagged struct {
	frame []byte
	tag   uint64
	err   error
}

func (f *tagTransport) ReadFrame() ([]byte, uint64, error) {
	select {
	case r, ok := <-f.in:
		if !ok {
			return nil, 0, io.EOF
		}
		return r.frame, r.tag, r.err
	case <-f.closed:
		return nil, 0, net.ErrClosed
	}
}

func (f *tagTransport) Buffered() bool { return len(f.in) > 0 }

func (f *tagTransport) WriteFrames(frames []outbox.Frame) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out = append(f.out, frames...)
	return nil
}

func (f *tagTransport) TryWrite(frames []outbox.Frame) (ok, more bool) {
	f.WriteFrames(frames)
	return true, false
}

func (f *tagTransport) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

func (f *tagTransport) written() []outbox.Frame {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]outbox.Frame(nil), f.out...)
}

// The tag a frame was read with reaches the Handler, and the session's own
// answers (to a malformed frame, an oversized one, a handling that
// panicked) carry it, as the last frame for that tag.
func TestTagsOfTheSessionsOwnAnswers(t *testing.T) {
	watchdog(t)
	tr := &tagTransport{in: make(chan tagged, 16), closed: make(chan struct{})}
	h := newFakeHandler()
	h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
		if m.Method == "boom" {
			panic("boom")
		}
	}
	sess := session.New(session.Config{Server: "srv"}, tr)
	for _, in := range []tagged{
		{frame: []byte(`{"jsonrpc":"2.0",`), tag: 5},
		{err: &jsonrpc.TooLargeError{Size: 2000, Limit: 1000, ID: json.RawMessage(`"big"`)}, tag: 6},
		{frame: []byte(request(`7`, "boom")), tag: 7},
		{frame: []byte(request(`8`, "fine")), tag: 8},
		{frame: []byte(`[{"jsonrpc":"2.0","method":"n"}]`), tag: 9},
	} {
		tr.in <- in
	}
	close(tr.in)
	assert.NoError(t, sess.Run(t.Context(), h), "Run until the client hangs up")

	type out struct {
		Tag    uint64
		Last   bool
		Answer answer
	}
	var got []out
	for _, f := range tr.written() {
		got = append(got, out{f.Tag, f.Last, decodeAnswer(t, f.Data)})
	}
	assert.Equal(t, []out{
		{5, true, errAnswer(`null`, -32700, "parse_error")},
		{6, true, errAnswer(`"big"`, -32600, "message_too_large")},
		{7, true, errAnswer(`7`, -32603, "internal_error")},
	}, got, "the session's own answers")
	var tags []uint64
	for range 3 {
		tags = append(tags, h.next(t, "a handled frame").tag)
	}
	assert.Equal(t, []uint64{7, 8, 9}, tags, "the tags the handler was given")
}
