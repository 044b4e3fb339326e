//go:build unix

package socket

import (
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/rawio"
)

func TestHeadersEnd(t *testing.T) {
	for _, tt := range []struct {
		tail, data string
		want       bool
	}{
		{"", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"", "GET / HTTP/1.1\nHost: x\n\n", true},
		{"", "GET / HTTP/1.1\r\nHost: x\r\n", false},
		{"x\r\n", "\r\n", true},
		{"\r\n\r", "\n", true},
		{"x\r", "\n\r\n", true},
		{"x\n", "\n", true},
		{"x\r\n", "X-A: b\r\n", false},
	} {
		assert.Equal(t, tt.want, headersEnd([]byte(tt.tail), []byte(tt.data)), "%q + %q", tt.tail, tt.data)
	}
	assert.Equal(t, "abc", string(lastBytes([]byte("xa"), []byte("bc"), 3)))
	assert.Equal(t, "cde", string(lastBytes([]byte("ab"), []byte("cde"), 3)))
	assert.Equal(t, "ab", string(lastBytes(nil, []byte("ab"), 3)))
}

// TestEvictionPassesOverWholeRequests: with the unchecked budget full, the
// connection closed for a new one is the oldest whose headers have not
// all come, not an older one whose whole request waits to be read.
func TestEvictionPassesOverWholeRequests(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(tl, 10, 2, nil)
	defer l.Close()
	dial := func(send string) (client, server net.Conn) {
		c, err := net.Dial("tcp", tl.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = c.Write([]byte(send))
		require.NoError(t, err)
		s, err := l.Accept()
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return c, s
	}
	whole, ws := dial("GET / HTTP/1.1\r\nHost: x\r\n\r\n") // never read: it waits in the kernel
	partial, ps := dial("GET / HTTP/1.1\r\n")
	buf := make([]byte, 64)
	require.Eventually(t, func() bool { return peekInput(ws, buf) == 27 && peekInput(ps, buf) == 16 },
		5*time.Second, time.Millisecond, "the bytes reached the server's side")
	dial("GET / HTTP/1.1\r\n")

	require.NoError(t, partial.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = partial.Read(make([]byte, 1))
	var ne net.Error
	require.Error(t, err)
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the partial one was closed: %v", err)
	require.NoError(t, whole.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = whole.Read(make([]byte, 1))
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "the whole one is still open: %v", err)
	checked, unchecked := l.counts()
	assert.Equal(t, []int{0, 2}, []int{checked, unchecked})
}

// TestEvictionOfWholeRequestsAtTwiceTheBudget: connections whose whole
// request waits are not closed for new ones up to twice the budget; past
// it the oldest is.
func TestEvictionOfWholeRequestsAtTwiceTheBudget(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(tl, 10, 2, nil)
	defer l.Close()
	const req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	buf := make([]byte, 64)
	var clients []net.Conn
	for i := range 5 {
		c, err := net.Dial("tcp", tl.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write([]byte(req))
		require.NoError(t, err)
		s, err := l.Accept()
		require.NoError(t, err)
		defer s.Close()
		require.Eventually(t, func() bool { return peekInput(s, buf) == len(req) }, 5*time.Second, time.Millisecond)
		clients = append(clients, c)
		_, unchecked := l.counts()
		assert.Equal(t, min(i+1, 4), unchecked, "after %d", i+1)
	}
	require.NoError(t, clients[0].SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = clients[0].Read(make([]byte, 1))
	var ne net.Error
	require.Error(t, err)
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the oldest was closed at twice the budget: %v", err)
}

// TestLimitedConnWriteProgress: a write with a deadline goes on while the
// client takes bytes, however long it takes in all, and fails once the
// client takes none for the deadline's time.
func TestLimitedConnWriteProgress(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(tl, 10, 2, nil)
	defer l.Close()
	client, err := net.Dial("tcp", tl.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	server, err := l.Accept()
	require.NoError(t, err)
	defer server.Close()

	// A window wide enough that a loaded machine's scheduling delays do
	// not look like a client that stopped reading.
	const window = time.Second
	payload := make([]byte, 8<<20)
	read := make(chan int, 1)
	go func() { // waited for below
		n := 0
		buf := make([]byte, 512<<10)
		tick := time.NewTicker(window / 5) // a slow client: 16 reads, 3.2 s in all
		defer tick.Stop()
		for n < len(payload) {
			<-tick.C
			m, err := client.Read(buf)
			n += m
			if err != nil {
				break
			}
		}
		read <- n
	}()
	began := time.Now()
	require.NoError(t, server.SetWriteDeadline(time.Now().Add(window)))
	n, err := server.Write(payload)
	require.NoError(t, err, "a slow client is not a dead one")
	assert.Equal(t, len(payload), n)
	assert.Equal(t, len(payload), <-read)
	assert.Greater(t, time.Since(began), 2*window)

	// No one reads. The kernel's socket buffers on loopback may take a
	// whole payload or more before a write blocks, so write until one does.
	for range 16 {
		require.NoError(t, server.SetWriteDeadline(time.Now().Add(window)))
		if _, err = server.Write(payload); err != nil {
			break
		}
	}
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "a client that takes nothing is cut off: %v", err)
}

// TestLimitedConnReadsRaw: on Linux the web listener's connections are
// read and written with rawio, past its header watch, and what passes is
// unchanged either way.
func TestLimitedConnReadsRaw(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(tl, 10, 2, nil)
	defer l.Close()
	c, err := net.Dial("tcp", tl.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	s, err := l.Accept()
	require.NoError(t, err)
	defer s.Close()
	lc := s.(*limitedConn)
	if runtime.GOOS == "linux" {
		assert.IsType(t, (*rawio.Reader)(nil), lc.r)
		assert.IsType(t, (*rawio.Writer)(nil), lc.w)
	}
	_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	got := make([]byte, 0, 64)
	for len(got) < 27 {
		buf := make([]byte, 64)
		n, err := s.Read(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	assert.Equal(t, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", string(got))
	complete, _ := lc.seen()
	assert.True(t, complete, "the header watch saw the request's end")
	_, err = s.Write([]byte("HTTP/1.1 204 No Content\r\n\r\n"))
	require.NoError(t, err)
	back := make([]byte, 64)
	n, err := io.ReadAtLeast(c, back, 27)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 204 No Content\r\n\r\n", string(back[:n]))
}
