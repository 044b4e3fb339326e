//go:build unix

package session_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

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
func numbered(prefix string, n, size int) (frames []outbox.Frame, wire []byte) {
	for i := range n {
		f := fmt.Appendf(nil, `{"%s":%d,"pad":"%s"}`, prefix, i, strings.Repeat("x", size))
		frames = append(frames, outbox.Frame{Data: f})
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
			frames []outbox.Frame
		}{
			{"nothing", nil},
			{"a small frame", data(`{"small":1}`)},
			{"a large frame and a small one", data(`{"large":"`+strings.Repeat("L", 10000)+`"}`, `{"small":2}`)},
			{"an end marker", []outbox.Frame{{Tag: 1, Last: true}}},
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
				ok, more = st.TryWrite(data(`{"cut in":1}`))
				assert.Equal(t, []bool{false, false}, []bool{ok, more}, "TryWrite while a rest is pending, into an empty send buffer")

				want := slices.Clone(wire)
				for _, f := range next.frames {
					if f.Data != nil {
						want = append(append(want, f.Data...), '\n')
					}
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
				ok, more = st.TryWrite([]outbox.Frame{{Data: last}, {Tag: 2, Last: true}})
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
