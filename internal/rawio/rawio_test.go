package rawio_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/rawio"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// socketPair is both ends of a Unix socket connection.
func socketPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(testutil.ShortDir(t), "s"))
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { // ends with the one Accept
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("unix", ln.Addr().String())
	require.NoError(t, err)
	s := <-accepted
	require.NotNil(t, s)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.UnixConn), s.(*net.UnixConn)
}

// wantRaw asserts that on Linux the descriptor is read or written raw.
func wantRaw(t *testing.T, got, given any) {
	t.Helper()
	if runtime.GOOS != "linux" {
		assert.Same(t, given, got, "elsewhere the ordinary calls")
		return
	}
	switch got.(type) {
	case *rawio.Reader, *rawio.Writer:
	default:
		t.Fatalf("got %T, want the raw reader or writer of a non-blocking descriptor", got)
	}
}

// TestReaderReadsSocket: what the peer writes is read as it comes, and
// its hanging up is io.EOF.
func TestReaderReadsSocket(t *testing.T) {
	a, b := socketPair(t)
	r := rawio.NewReader(a)
	wantRaw(t, r, a)

	go func() { // the peer: writes twice, hangs up
		b.Write([]byte("one\n"))
		b.Write([]byte("two\n"))
		b.CloseWrite()
	}()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(got))
	n, err := r.Read(make([]byte, 8))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "at the end it stays at the end")
}

// TestReaderDeadlineAndClose: a read deadline ends a read that waits, as
// on the connection itself, and so does closing the connection.
func TestReaderDeadlineAndClose(t *testing.T) {
	a, _ := socketPair(t)
	r := rawio.NewReader(a)
	require.NoError(t, a.SetReadDeadline(time.Now().Add(30*time.Millisecond)))
	_, err := r.Read(make([]byte, 8))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, a.SetReadDeadline(time.Time{}))

	done := make(chan error, 1)
	go func() { // the read that Close ends
		_, err := r.Read(make([]byte, 8))
		done <- err
	}()
	testutil.Until(t, 5*time.Second, "Close ends the waiting read", func() bool {
		a.Close()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, net.ErrClosed)
			return true
		default:
			return false
		}
	})
}

// TestReaderReadsPipe: a pipe made by os.Pipe is read raw; its writer's
// Close is io.EOF, and closing the read end ends a waiting read.
func TestReaderReadsPipe(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	r := rawio.NewReader(pr)
	wantRaw(t, r, pr)
	go func() { // the writer
		pw.Write([]byte(`{"jsonrpc":"2.0"}` + "\n"))
		pw.Close()
	}()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0"}`+"\n", string(got))

	pr2, pw2, err := os.Pipe()
	require.NoError(t, err)
	defer pw2.Close()
	r2 := rawio.NewReader(pr2)
	done := make(chan error, 1)
	go func() { // the read that Close ends
		_, err := r2.Read(make([]byte, 8))
		done <- err
	}()
	testutil.Until(t, 5*time.Second, "closing the read end ends the read", func() bool {
		pr2.Close()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, "closed", "an error, not io.EOF")
			return true
		default:
			return false
		}
	})
}

// TestBlockingDescriptorIsLeftAlone: a descriptor in blocking mode (a
// stdin the parent made) is read and written with the ordinary calls: a
// raw read of it would hold a thread of the scheduler's.
func TestBlockingDescriptorIsLeftAlone(t *testing.T) {
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	r := os.NewFile(uintptr(fds[0]), "blocking read end")
	w := os.NewFile(uintptr(fds[1]), "blocking write end")
	defer r.Close()
	defer w.Close()
	assert.Same(t, r, rawio.NewReader(r))
	assert.Same(t, w, rawio.NewWriter(w))
	var buf bytes.Buffer
	assert.Same(t, &buf, rawio.NewReader(&buf), "not a descriptor")
}

// TestWriterWaitsForRoom: a write larger than the socket takes at once
// waits for the peer to read, and arrives whole; with no reader its write
// deadline ends it, saying how much was written.
func TestWriterWaitsForRoom(t *testing.T) {
	a, b := socketPair(t)
	w := rawio.NewWriter(a)
	wantRaw(t, w, a)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	got := make(chan []byte, 1)
	go func() { // the peer: reads it all
		buf := make([]byte, 0, len(big))
		tmp := make([]byte, 4096)
		for len(buf) < len(big) {
			n, err := b.Read(tmp)
			if err != nil {
				break
			}
			buf = append(buf, tmp[:n]...)
		}
		got <- buf
	}()
	n, err := w.Write(big)
	require.NoError(t, err)
	assert.Equal(t, len(big), n)
	assert.True(t, bytes.Equal(big, <-got), "the bytes arrive whole, in order")

	require.NoError(t, a.SetWriteDeadline(time.Now().Add(50*time.Millisecond)))
	n, err = w.Write(big) // nobody reads now
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Less(t, n, len(big))
}

// TestWriterReportsBrokenPipe: a write to a peer that has gone is an
// error naming the system call, not a silent loss.
func TestWriterReportsBrokenPipe(t *testing.T) {
	a, b := socketPair(t)
	w := rawio.NewWriter(a)
	require.NoError(t, b.Close())
	var err error
	testutil.Until(t, 5*time.Second, "the write fails", func() bool {
		_, err = w.Write([]byte("x\n"))
		return err != nil
	})
	assert.True(t, errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET), "%v", err)
	assert.Contains(t, err.Error(), "write")
}
