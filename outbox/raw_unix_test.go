//go:build unix

package outbox_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/outbox"
)

// socketPair is a connected pair of Unix stream sockets whose first end
// has a send buffer as small as the system allows near 4 KiB, so that a
// large write is taken only in part. Both are closed at cleanup.
func socketPair(t *testing.T) (server, client net.Conn, raw syscall.RawConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err, "socketpair")
	require.NoError(t, syscall.SetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4<<10))
	conn := func(fd int) net.Conn {
		syscall.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close() // FileConn dups the descriptor
		c, err := net.FileConn(f)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	server, client = conn(fds[0]), conn(fds[1])
	raw, err = server.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	// A test that fails must not hang in a write nobody reads.
	require.NoError(t, server.SetWriteDeadline(time.Now().Add(patience)))
	return server, client, raw
}

// readAvailable reads, without blocking, whatever c has received so far.
func readAvailable(t *testing.T, c net.Conn) []byte {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	var got []byte
	buf := make([]byte, 64<<10)
	require.NoError(t, raw.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if n <= 0 {
				return true
			}
			got = append(got, buf[:n]...)
		}
	}))
	return got
}

// readFull reads n bytes from c within patience.
func readFull(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(patience)))
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	require.NoError(t, err, "reading %d bytes", n)
	return b
}

func TestTryWriteRaw(t *testing.T) {
	t.Run("taken in part: the rest is returned", func(t *testing.T) {
		_, client, raw := socketPair(t)
		b := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: more than any send buffer
		ok, more, rest := outbox.TryWriteRaw(raw, b)
		require.Equal(t, []bool{true, true}, []bool{ok, more}, "a write far larger than the send buffer")
		part := readAvailable(t, client)
		require.NotEmpty(t, rest)
		assert.Equal(t, len(b), len(part)+len(rest), "what was taken and the rest make the whole")
		assert.True(t, bytes.Equal(b, append(part, rest...)), "in order")
		rest[0] = 'X'
		assert.NotEqual(t, byte('X'), b[len(part)], "the rest is a copy")
	})

	t.Run("whole", func(t *testing.T) {
		_, client, raw := socketPair(t)
		ok, more, rest := outbox.TryWriteRaw(raw, []byte("hello\n"))
		assert.Equal(t, []bool{true, false}, []bool{ok, more})
		assert.Nil(t, rest)
		assert.Equal(t, "hello\n", string(readFull(t, client, 6)))
	})

	t.Run("full send buffer: nothing written", func(t *testing.T) {
		_, client, raw := socketPair(t)
		for {
			if ok, more, _ := outbox.TryWriteRaw(raw, bytes.Repeat([]byte{'f'}, 64<<10)); !ok || more {
				break // the buffer is now full
			}
		}
		ok, more, rest := outbox.TryWriteRaw(raw, []byte("late\n"))
		assert.Equal(t, []bool{false, false}, []bool{ok, more}, "into a full send buffer")
		assert.Nil(t, rest)
		assert.NotContains(t, string(readAvailable(t, client)), "late")
	})

	t.Run("closed connection", func(t *testing.T) {
		server, _, raw := socketPair(t)
		require.NoError(t, server.Close())
		ok, more, rest := outbox.TryWriteRaw(raw, []byte("x\n"))
		assert.Equal(t, []bool{false, false}, []bool{ok, more})
		assert.Nil(t, rest)
	})
}

// A RawWriter kept by its Writer writes as TryWriteRaw does, again and
// again, without an allocation for each write that the descriptor takes
// whole, and keeps no reference to the caller's buffer.
func TestRawWriterAllocatesNothing(t *testing.T) {
	_, client, raw := socketPair(t)
	var w outbox.RawWriter
	line := []byte("hello\n")
	ok, more, rest := w.TryWrite(raw, line)
	require.Equal(t, []bool{true, false}, []bool{ok, more})
	assert.Nil(t, rest)
	assert.Equal(t, "hello\n", string(readFull(t, client, 6)))
	allocs := testing.AllocsPerRun(100, func() {
		if ok, more, _ := w.TryWrite(raw, line); !ok || more {
			t.Error("a 6-byte write into a drained socket was not taken whole")
		}
		readFull(t, client, len(line)) // keep the send buffer empty
	})
	// readFull's own buffer is the one allocation the loop may make.
	assert.LessOrEqual(t, allocs, 1.0, "allocations per write and read")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)
	ok, more, rest = w.TryWrite(raw, big)
	require.Equal(t, []bool{true, true}, []bool{ok, more}, "a write far larger than the send buffer")
	part := readAvailable(t, client)
	assert.True(t, bytes.Equal(big, append(part, rest...)), "what was taken and the rest make the whole, in order")
}

// lineWriter is an outbox.Writer over a socket, one frame per line, as a
// real connection's Writer is: TryWrite through TryWriteRaw, its rest
// written first by the next WriteFrames.
type lineWriter struct {
	conn net.Conn
	raw  syscall.RawConn
	rest []byte
}

func (w *lineWriter) WriteFrames(frames []outbox.Frame) error {
	b := w.rest
	w.rest = nil
	for _, f := range frames {
		b = append(append(b, f.Data...), '\n')
	}
	_, err := w.conn.Write(b)
	return err
}

func (w *lineWriter) TryWrite(frames []outbox.Frame) (ok, more bool) {
	if len(w.rest) > 0 {
		return false, false
	}
	var b []byte
	for _, f := range frames {
		b = append(append(b, f.Data...), '\n')
	}
	ok, more, w.rest = outbox.TryWriteRaw(w.raw, b)
	return ok, more
}

// A Flush whose write a socket takes only in part leaves the rest to the
// writer goroutine, which sends it although nothing else is queued, and
// before anything sent after.
func TestFlushPartialWriteFinishedByWriter(t *testing.T) {
	server, client, raw := socketPair(t)
	q := outbox.New(&lineWriter{conn: server, raw: raw}, outbox.Config{HighWater: big, Max: big, Separator: 1})
	running(t, q)

	// 60 KB: under DirectMax, far over the send buffer.
	var wire []byte
	for i := range 60 {
		f := numbered(0, i, 1000)
		wire = append(append(wire, f.Data...), '\n')
		require.NoError(t, q.SendLater(f))
	}
	q.Flush()
	got := readFull(t, client, len(wire))
	assert.True(t, bytes.Equal(wire, got), "every frame once, in order, with nothing else")

	require.NoError(t, q.Send(frame(`{"after":1}`)))
	assert.Equal(t, "{\"after\":1}\n", string(readFull(t, client, len(`{"after":1}`)+1)))
	assert.Eventually(t, func() bool {
		return q.Bytes() == 0 && q.Written() == int64(len(wire)+len(`{"after":1}`)+1)
	}, patience, time.Millisecond, "the queue drains and counts every byte out")
}
