//go:build unix

package session_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
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

func (h *holdingHandler) HandleMessage(s *session.Session, m *jsonrpc.Message) {
	s.Begin()
	h.held = append(h.held, m)
}

func (h *holdingHandler) HandleBatch(*session.Session, []byte) {}
func (h *holdingHandler) WaitRoom(context.Context) error       { return nil }

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
					sess.Send(jsonrpc.Response(m.ID, json.RawMessage(`"ok"`)))
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

// TestSendLaterAndFlushKeepEachSendersOrder sends numbered frames from
// several goroutines, each mixing Send, SendLater and Flush: every frame
// reaches the client whole, once, and each goroutine's frames in the order
// it sent them. Some frames are over the size that is gathered into one
// buffer, and some runs are over what Flush writes itself.
func TestSendLaterAndFlushKeepEachSendersOrder(t *testing.T) {
	const senders, each = 6, 300
	padOf := func(g, i int) int {
		if i%50 == 49 {
			return 9000 // written from its own slice, and over half the flush limit when held
		}
		return 10 + (g*each+i)%7*300
	}
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			hs := start(t, ct, session.Config{OutboxHighWater: 8 << 20, OutboxMax: 64 << 20}, newFakeHandler(), 0)
			var wg sync.WaitGroup
			errs := make(chan error, senders)
			for g := range senders {
				wg.Go(func() {
					for i := range each {
						frame := fmt.Appendf(nil, `{"g":%d,"i":%d,"pad":"%s"}`, g, i, strings.Repeat("p", padOf(g, i)))
						var err error
						switch i % 4 {
						case 0:
							err = hs.sess.Send(frame)
						case 1, 2:
							err = hs.sess.SendLater(frame) // out with the next Send or Flush, by anyone
						case 3:
							err = hs.sess.SendLater(frame)
							hs.sess.Flush()
						}
						if err != nil {
							errs <- fmt.Errorf("sender %d, frame %d: %w", g, i, err)
							return
						}
					}
					hs.sess.Flush()
				})
			}
			next := make([]int, senders)
			for n := range senders * each {
				line := hs.readLine(fmt.Sprintf("frame %d of %d", n+1, senders*each))
				var f struct {
					G, I int
					Pad  string
				}
				require.NoError(t, json.Unmarshal(line, &f), "a torn or interleaved frame: %.200q", line)
				require.Less(t, f.G, senders, "frame %.100q", line)
				require.Equal(t, next[f.G], f.I, "sender %d's frames out of order", f.G)
				require.Len(t, f.Pad, padOf(f.G, f.I), "frame %d of sender %d", f.I, f.G)
				next[f.G]++
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.NoError(t, err)
			}
			assert.Eventually(t, func() bool { return hs.sess.Stats().Queued == 0 }, waitLong, time.Millisecond, "the outbox drains")
			assert.Nil(t, hs.sess.Err())
		})
	}
}

// setSendBuffer makes c's kernel send buffer as small as the system allows
// near n, so that a write larger than it is taken only in part.
func setSendBuffer(t *testing.T, c net.Conn, n int) {
	t.Helper()
	sc, ok := c.(syscall.Conn)
	require.True(t, ok, "%T has no SyscallConn", c)
	raw, err := sc.SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, n)
	}))
	require.NoError(t, serr, "SO_SNDBUF")
}

// fillSendBuffer writes filler bytes to c, without blocking, until the
// kernel takes no more, and returns what it wrote.
func fillSendBuffer(t *testing.T, c net.Conn) []byte {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{'f'}, 4<<10)
	n := 0
	var werr error
	require.NoError(t, raw.Write(func(fd uintptr) bool {
		for {
			m, err := syscall.Write(int(fd), chunk)
			switch {
			case errors.Is(err, syscall.EINTR):
			case errors.Is(err, syscall.EAGAIN):
				return true
			case err != nil:
				werr = err
				return true
			default:
				n += m
			}
		}
	}))
	require.NoError(t, werr, "filling the send buffer")
	require.Positive(t, n, "the send buffer took nothing at all")
	return bytes.Repeat([]byte{'f'}, n)
}

// drainAvailable reads, without blocking, whatever c has received so far.
func drainAvailable(t *testing.T, c net.Conn) []byte {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var got []byte
	buf := make([]byte, 64<<10)
	var rerr error
	require.NoError(t, raw.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			switch {
			case errors.Is(err, syscall.EINTR):
			case errors.Is(err, syscall.EAGAIN):
				return true
			case err != nil:
				rerr = err
				return true
			case n == 0:
				rerr = io.EOF
				return true
			default:
				got = append(got, buf[:n]...)
			}
		}
	}))
	require.NoError(t, rerr, "draining the client")
	return got
}

// readInBackground reads exactly n bytes from c on a goroutine that the
// test's cleanup waits for; wait returns them.
func readInBackground(t *testing.T, c net.Conn, n int) (wait func() []byte) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(waitLong)))
	go func() {
		b := make([]byte, n)
		_, err := io.ReadFull(c, b)
		done <- result{b, err}
	}()
	var res *result
	wait = func() []byte {
		t.Helper()
		if res == nil {
			r := <-done // bounded by the read deadline
			res = &r
		}
		require.NoError(t, res.err, "reading %d bytes", n)
		return res.b
	}
	t.Cleanup(func() {
		c.Close()
		if res == nil {
			<-done
		}
	})
	return wait
}

// numbered returns n frames of about size bytes each, and the bytes they
// make on the wire, each with its newline.
func numbered(prefix string, n, size int) (frames [][]byte, wire []byte) {
	for i := range n {
		f := fmt.Appendf(nil, `{"%s":%d,"pad":"%s"}`, prefix, i, strings.Repeat("x", size))
		frames = append(frames, f)
		wire = append(append(wire, f...), '\n')
	}
	return frames, wire
}

func TestStreamTryWrite(t *testing.T) {
	watchdog(t)
	// A megabyte: more than any socket's send buffer takes in one go.
	frames, wire := numbered("n", 1024, 1000)

	t.Run("partial write keeps the rest for WriteFrames", func(t *testing.T) {
		for _, next := range []struct {
			name   string
			frames [][]byte
		}{
			{"nothing", nil},
			{"a small frame", [][]byte{[]byte(`{"small":1}`)}},
			{"a large frame and a small one", [][]byte{[]byte(`{"large":"` + strings.Repeat("L", 10000) + `"}`), []byte(`{"small":2}`)}},
		} {
			t.Run("then "+next.name, func(t *testing.T) {
				server, client := socketPair(t)
				defer server.Close()
				setSendBuffer(t, server, 4<<10)
				// A test that fails must not hang in a write nobody reads.
				require.NoError(t, server.SetWriteDeadline(time.Now().Add(waitLong)))
				st := session.NewStream(server, 1<<20)

				ok, more := st.TryWrite(frames)
				require.Equal(t, []bool{true, true}, []bool{ok, more}, "TryWrite of %d bytes into a small send buffer nobody reads: written in part", len(wire))

				// The client takes what was written, so the send buffer is
				// empty again; the rest must still go first: TryWrite
				// refuses while there is one.
				part := drainAvailable(t, client)
				require.NotEmpty(t, part, "TryWrite reported a partial write")
				require.Less(t, len(part), len(wire), "TryWrite reported a partial write")
				ok, more = st.TryWrite([][]byte{[]byte(`{"cut in":1}`)})
				assert.Equal(t, []bool{false, false}, []bool{ok, more}, "TryWrite while a rest is pending, into an empty send buffer")

				want := slices.Clone(wire)
				for _, f := range next.frames {
					want = append(append(want, f...), '\n')
				}
				read := readInBackground(t, client, len(want)-len(part))
				// The rest goes out with the next WriteFrames, first.
				require.NoError(t, st.WriteFrames(next.frames), "WriteFrames(%s)", next.name)
				got := append(part, read()...)
				assert.Equal(t, len(want), len(got))
				assert.True(t, bytes.Equal(want, got), "the reader sees every byte, the rest first, in order (first difference at %d)", firstDiff(want, got))

				// All read: the buffer is empty, and a small write is whole.
				last := []byte(`{"last":1}`)
				read = readInBackground(t, client, len(last)+1)
				ok, more = st.TryWrite([][]byte{last})
				assert.Equal(t, []bool{true, false}, []bool{ok, more}, "TryWrite into an empty send buffer")
				assert.Equal(t, string(last)+"\n", string(read()))
			})
		}
	})

	t.Run("full send buffer: nothing written", func(t *testing.T) {
		server, client := socketPair(t)
		defer server.Close()
		setSendBuffer(t, server, 4<<10)
		require.NoError(t, server.SetWriteDeadline(time.Now().Add(waitLong)))
		st := session.NewStream(server, 1<<20)
		filler := fillSendBuffer(t, server)
		few, fewWire := numbered("few", 3, 10)

		ok, more := st.TryWrite(few)
		require.Equal(t, []bool{false, false}, []bool{ok, more}, "TryWrite into a full send buffer")

		want := append(filler, fewWire...)
		read := readInBackground(t, client, len(want))
		require.NoError(t, st.WriteFrames(few), "the frames go out through the writer instead")
		got := read()
		assert.True(t, bytes.Equal(want, got), "filler, then the frames, once each (first difference at %d)", firstDiff(want, got))
	})

	t.Run("connection without SyscallConn", func(t *testing.T) {
		server, client := net.Pipe()
		defer server.Close()
		st := session.NewStream(server, 1<<20)
		ok, more := st.TryWrite(frames[:2])
		assert.Equal(t, []bool{false, false}, []bool{ok, more}, "TryWrite over net.Pipe")

		// Nothing went out; the writer's way still works.
		_, wire2 := numbered("n", 2, 1000)
		read := readInBackground(t, client, len(wire2))
		wrote := make(chan error, 1)
		go func() { wrote <- st.WriteFrames(frames[:2]) }() // net.Pipe: blocks until read
		assert.Equal(t, string(wire2), string(read()), "the first bytes the client reads are the writer's")
		select {
		case err := <-wrote:
			assert.NoError(t, err)
		case <-time.After(waitLong):
			server.Close()
			<-wrote
			require.FailNow(t, "WriteFrames did not return after its bytes were read")
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFlushPartialWriteFinishedByWriter: a Flush whose direct write is
// taken only in part leaves the rest to the writer, which must send it
// even though nothing else is queued, before anything sent after.
func TestFlushPartialWriteFinishedByWriter(t *testing.T) {
	server, client := socketPair(t)
	defer client.Close()
	setSendBuffer(t, server, 4<<10)
	sess := session.New(session.Config{}, session.NewStream(server, 1<<20))
	runSession(t, sess, newFakeHandler())

	// 60 KB: under what Flush writes itself, far over the send buffer.
	frames, wire := numbered("n", 60, 1000)
	for _, f := range frames {
		require.NoError(t, sess.SendLater(f))
	}
	sess.Flush()
	got := readInBackground(t, client, len(wire))()
	assert.True(t, bytes.Equal(wire, got), "every frame once, in order, with nothing else sent (first difference at %d of %d)", firstDiff(wire, got), len(wire))

	after := []byte(`{"after":1}`)
	require.NoError(t, sess.Send(after))
	assert.Equal(t, string(after)+"\n", string(readInBackground(t, client, len(after)+1)()))
	want := append(slices.Clone(wire), append(after, '\n')...)
	assert.Eventually(t, func() bool {
		st := sess.Stats()
		return st.Queued == 0 && st.BytesOut == int64(len(want)-len(frames)-1)
	}, waitLong, time.Millisecond, "the outbox drains and counts every frame out (newlines aside)")
}

// turnsTransport is a fake Transport with the session's optional writes.
// Its wire is the frames it took, in order. TryWrite takes all, none or
// part of its frames as mode says, keeping a part's rest for the next
// WriteFrames as Stream does. It counts write calls that overlap, which the
// session must never make: the writer and Flush take turns.
type turnsTransport struct {
	closed    chan struct{}
	closeOnce sync.Once
	busy      atomic.Int32 // write calls in progress
	overlaps  atomic.Int32 // write calls that began while another was in progress

	mu    sync.Mutex
	calls []string // "try" and "write", as they began
	wire  []string
	rest  []string
	mode  func() string // for TryWrite: "all", "none" or "part"; nil is "all"
	// during, when set, runs at the start of each TryWrite, outside mu:
	// what other goroutines do while a Flush is writing.
	during func()
	hold   chan struct{} // the next WriteFrames waits for it to close
	slow   bool          // WriteFrames yields mid-write, to widen windows
}

func newTurnsTransport() *turnsTransport {
	return &turnsTransport{closed: make(chan struct{})}
}

func (f *turnsTransport) ReadFrame() ([]byte, error) {
	<-f.closed
	return nil, net.ErrClosed
}

func (f *turnsTransport) Close() error {
	f.closeOnce.Do(func() { close(f.closed) })
	return nil
}

func (f *turnsTransport) enter(kind string) {
	if f.busy.Add(1) > 1 {
		f.overlaps.Add(1)
	}
	f.mu.Lock()
	f.calls = append(f.calls, kind)
	f.mu.Unlock()
}

func (f *turnsTransport) WriteFrame(frame []byte) error {
	return f.WriteFrames([][]byte{frame})
}

func (f *turnsTransport) WriteFrames(frames [][]byte) error {
	f.enter("write")
	defer f.busy.Add(-1)
	f.mu.Lock()
	hold, slow := f.hold, f.slow
	f.hold = nil
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-f.closed:
			return net.ErrClosed
		}
	}
	if slow {
		runtime.Gosched()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wire = append(f.wire, f.rest...)
	f.rest = nil
	for _, fr := range frames {
		f.wire = append(f.wire, string(fr))
	}
	return nil
}

func (f *turnsTransport) TryWrite(frames [][]byte) (ok, more bool) {
	f.enter("try")
	defer f.busy.Add(-1)
	f.mu.Lock()
	during, slow := f.during, f.slow
	f.mu.Unlock()
	if during != nil {
		during()
	}
	if slow {
		runtime.Gosched()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rest) > 0 {
		return false, false
	}
	mode := "all"
	if f.mode != nil {
		mode = f.mode()
	}
	k := len(frames)
	switch mode {
	case "none":
		return false, false
	case "part":
		k = len(frames) / 2 // a whole frame left, at least: the rest is never empty
	}
	for _, fr := range frames[:k] {
		f.wire = append(f.wire, string(fr))
	}
	for _, fr := range frames[k:] {
		f.rest = append(f.rest, string(fr))
	}
	return true, k < len(frames)
}

// snapshot returns the calls and the wire so far.
func (f *turnsTransport) snapshot() (calls, wire []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls), slices.Clone(f.wire)
}

// waitWire waits until the wire holds n frames and returns the calls and
// the wire.
func (f *turnsTransport) waitWire(t *testing.T, n int, why string) (calls, wire []string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, wire := f.snapshot()
		return len(wire) >= n
	}, waitLong, time.Millisecond, "%d frames on the wire: %s", n, why)
	return f.snapshot()
}

func TestFlushTakesTurnsWithWriter(t *testing.T) {
	t.Run("idle writer: Flush writes itself", func(t *testing.T) {
		tr := newTurnsTransport()
		sess := session.New(session.Config{}, tr)
		runSession(t, sess, newFakeHandler())
		require.NoError(t, sess.SendLater([]byte(`{"a":1}`)))
		require.NoError(t, sess.SendLater([]byte(`{"b":2}`)))
		sess.Flush()
		// Synchronous: Flush wrote before it returned, in one call.
		calls, wire := tr.snapshot()
		assert.Equal(t, []string{"try"}, calls)
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`}, wire)
		st := sess.Stats()
		assert.Equal(t, []int64{0, int64(len(`{"a":1}{"b":2}`))}, []int64{int64(st.Queued), st.BytesOut}, "queued and out after the Flush")

		sess.Flush() // nothing queued: nothing written
		require.NoError(t, sess.Send([]byte(`{"c":3}`)))
		calls, wire = tr.waitWire(t, 3, "Send wakes the writer")
		assert.Equal(t, []string{"try", "write"}, calls)
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, wire)
		assert.Zero(t, tr.overlaps.Load(), "overlapping write calls")
	})

	t.Run("nothing taken: the writer writes", func(t *testing.T) {
		tr := newTurnsTransport()
		tr.mode = func() string { return "none" }
		sess := session.New(session.Config{}, tr)
		runSession(t, sess, newFakeHandler())
		require.NoError(t, sess.SendLater([]byte(`{"a":1}`)))
		sess.Flush()
		calls, wire := tr.waitWire(t, 1, "the writer takes over the frames TryWrite refused")
		assert.Equal(t, []string{"try", "write"}, calls)
		assert.Equal(t, []string{`{"a":1}`}, wire)
		assert.Eventually(t, func() bool { return sess.Stats().Queued == 0 }, waitLong, time.Millisecond, "the outbox drains")
	})

	t.Run("part taken: the writer sends the rest with nothing queued", func(t *testing.T) {
		tr := newTurnsTransport()
		tr.mode = func() string { return "part" }
		sess := session.New(session.Config{}, tr)
		runSession(t, sess, newFakeHandler())
		for _, f := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
			require.NoError(t, sess.SendLater([]byte(f)))
		}
		sess.Flush()
		calls, wire := tr.waitWire(t, 3, "the rest of a partial TryWrite")
		assert.Equal(t, []string{"try", "write"}, calls)
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, wire)
	})

	// While a Flush writes, another goroutine queues a frame; the frames
	// the Flush could not write must still go out ahead of it.
	for _, mode := range []string{"none", "part"} {
		t.Run("frames queued during a TryWrite that took "+mode+" go after", func(t *testing.T) {
			tr := newTurnsTransport()
			var sess *session.Session
			var duringErr error
			tr.mode = func() string { return mode }
			tr.during = func() {
				tr.mu.Lock()
				tr.during = nil // once
				tr.mu.Unlock()
				duringErr = sess.SendLater([]byte(`{"later":1}`))
			}
			sess = session.New(session.Config{}, tr)
			runSession(t, sess, newFakeHandler())
			for _, f := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
				require.NoError(t, sess.SendLater([]byte(f)))
			}
			sess.Flush()
			require.NoError(t, duringErr)
			_, wire := tr.waitWire(t, 4, "the flushed frames and the one queued meanwhile")
			assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`, `{"later":1}`}, wire)
			assert.Zero(t, tr.overlaps.Load(), "overlapping write calls")
		})
	}

	t.Run("busy writer: Flush leaves the frames to it", func(t *testing.T) {
		tr := newTurnsTransport()
		hold := make(chan struct{})
		tr.hold = hold
		sess := session.New(session.Config{}, tr)
		runSession(t, sess, newFakeHandler())

		require.NoError(t, sess.Send([]byte(`{"a":1}`)))
		require.Eventually(t, func() bool { calls, _ := tr.snapshot(); return len(calls) == 1 },
			waitLong, time.Millisecond, "the writer starts its write")

		require.NoError(t, sess.SendLater([]byte(`{"b":2}`)))
		require.NoError(t, sess.SendLater([]byte(`{"c":3}`)))
		flushed := make(chan struct{})
		go func() {
			defer close(flushed)
			sess.Flush()
		}()
		select {
		case <-flushed:
		case <-time.After(waitLong):
			close(hold)
			<-flushed
			require.FailNow(t, "Flush blocked while the writer was busy")
		}
		calls, wire := tr.snapshot()
		assert.Equal(t, []string{"write"}, calls, "Flush must not write while the writer is in a write")
		assert.Empty(t, wire)

		close(hold)
		calls, wire = tr.waitWire(t, 3, "the writer takes the flushed frames after its write")
		assert.Equal(t, []string{"write", "write"}, calls)
		assert.Equal(t, []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}, wire)
		assert.Zero(t, tr.overlaps.Load(), "overlapping write calls")
	})

	t.Run("many senders, every outcome of TryWrite", func(t *testing.T) {
		const senders, each = 6, 400
		tr := newTurnsTransport()
		tr.slow = true
		var tries int
		tr.mode = func() string { // under tr.mu
			tries++
			return [...]string{"all", "none", "part", "all"}[tries%4]
		}
		sess := session.New(session.Config{}, tr)
		runSession(t, sess, newFakeHandler())
		var wg sync.WaitGroup
		errs := make(chan error, senders)
		for g := range senders {
			wg.Go(func() {
				for i := range each {
					frame := fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i)
					var err error
					switch i % 5 {
					case 0:
						err = sess.Send(frame)
					case 1, 2:
						err = sess.SendLater(frame)
					case 3:
						err = sess.SendLater(frame)
						sess.Flush()
					case 4:
						sess.Flush()
						err = sess.SendLater(frame)
					}
					if err != nil {
						errs <- fmt.Errorf("sender %d, frame %d: %w", g, i, err)
						return
					}
				}
				sess.Flush()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		calls, wire := tr.waitWire(t, senders*each, "every frame")
		next := make([]int, senders)
		for _, line := range wire {
			var f struct{ G, I int }
			require.NoError(t, json.Unmarshal([]byte(line), &f), "frame %q", line)
			require.Equal(t, next[f.G], f.I, "sender %d's frames out of order", f.G)
			next[f.G]++
		}
		assert.Len(t, wire, senders*each, "no frame twice")
		assert.Zero(t, tr.overlaps.Load(), "overlapping write calls")
		assert.Contains(t, calls, "try", "Flush wrote some frames itself")
		assert.Eventually(t, func() bool { return sess.Stats().Queued == 0 }, waitLong, time.Millisecond, "the outbox drains")
	})
}
