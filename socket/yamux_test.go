//go:build unix

package socket_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// unixPair is a connected pair of Unix stream sockets, each a *net.UnixConn
// as an accepted connection is; both are closed at cleanup.
func unixPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

func pipePair(t *testing.T) (server, client net.Conn) {
	s, c := net.Pipe()
	t.Cleanup(func() { s.Close(); c.Close() })
	return s, c
}

func TestSniffKeepsFirstByte(t *testing.T) {
	for _, pair := range []struct {
		name string
		make func(*testing.T) (net.Conn, net.Conn)
	}{{"unix", unixPair}, {"pipe", pipePair}} {
		t.Run(pair.name, func(t *testing.T) {
			server, client := pair.make(t)
			go client.Write([]byte("{\"id\":1}\n")) // net.Pipe: the write waits for the reads
			first, conn, err := socket.Sniff(t.Context(), server)
			require.NoError(t, err)
			assert.Equal(t, byte('{'), first)
			if pair.name == "unix" {
				assert.Same(t, server, conn, "a Unix connection is peeked at, not wrapped")
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, "{\"id\":1}\n", line, "the first byte is read again")
		})
	}
}

func TestSniffHangupAndContext(t *testing.T) {
	server, client := unixPair(t)
	client.Close()
	_, _, err := socket.Sniff(t.Context(), server)
	assert.ErrorIs(t, err, io.EOF, "a peer that leaves without a byte")

	server, _ = unixPair(t)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, _, err = socket.Sniff(ctx, server)
	assert.ErrorIs(t, err, context.Canceled, "ctx ends the wait for the first byte")
}

// yamuxServer runs ServeYamux on the server end of a Unix pair, with line
// echo handlers, and returns the client's yamux session.
type yamuxServer struct {
	client *yamux.Session
	log    *socket.LogRecorder
	done   chan error // ServeYamux's result
	ids    chan uint32
	cancel context.CancelFunc
}

func startYamux(t *testing.T, maxStreams int) *yamuxServer {
	t.Helper()
	server, client := unixPair(t)
	ys := &yamuxServer{log: new(socket.LogRecorder), done: make(chan error, 1), ids: make(chan uint32, 64)}
	ctx, cancel := context.WithCancel(t.Context())
	ys.cancel = cancel
	go func() {
		ys.done <- socket.ServeYamux(ctx, server, socket.YamuxConfig{MaxStreams: maxStreams, Logger: slog.New(ys.log)},
			func(ctx context.Context, st net.Conn, id uint32) {
				defer st.Close()
				ys.ids <- id
				br := bufio.NewReader(st)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(st, fmt.Sprintf("%d %s", id, line)); err != nil {
						return
					}
				}
			})
	}()
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	sess, err := yamux.Client(client, cfg)
	require.NoError(t, err)
	ys.client = sess
	t.Cleanup(func() {
		sess.Close()
		cancel()
		select {
		case <-ys.done:
		case <-time.After(10 * time.Second):
			t.Error("ServeYamux did not return")
		}
	})
	return ys
}

// echoLine writes line on st and returns the answer.
func echoLine(st net.Conn, br *bufio.Reader, line string) (string, error) {
	st.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(st, line+"\n"); err != nil {
		return "", err
	}
	got, err := br.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

func TestServeYamuxStreams(t *testing.T) {
	ys := startYamux(t, 0)
	const n = 20
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, err := ys.client.OpenStream()
			if err != nil {
				errs[i] = err
				return
			}
			defer st.Close()
			got[i], errs[i] = echoLine(st, bufio.NewReader(st), fmt.Sprintf("hello %d", i))
			if errs[i] == nil {
				got[i] = strings.Replace(got[i], fmt.Sprint(st.StreamID()), "ID", 1)
			}
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "stream %d", i)
		assert.Equal(t, fmt.Sprintf("ID hello %d", i), got[i], "stream %d is answered by its own handler", i)
	}
}

// TestServeYamuxMaxStreams: a stream over the limit is closed at once and
// logged; once a stream ends there is room again.
func TestServeYamuxMaxStreams(t *testing.T) {
	ys := startYamux(t, 2)
	var open []*yamux.Stream
	for i := range 2 {
		st, err := ys.client.OpenStream()
		require.NoError(t, err)
		_, err = echoLine(st, bufio.NewReader(st), "hi")
		require.NoError(t, err, "stream %d within the limit", i)
		open = append(open, st)
	}
	over, err := ys.client.OpenStream()
	require.NoError(t, err)
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = over.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the stream over the limit is closed")
	var refusals []socket.Record
	for _, r := range ys.log.Records() {
		if strings.Contains(r.Msg, "max_streams_per_conn") {
			refusals = append(refusals, r)
		}
	}
	require.Len(t, refusals, 1)
	assert.Equal(t, slog.LevelWarn, refusals[0].Level)

	open[0].Close()
	eventuallyEcho := func() bool {
		st, err := ys.client.OpenStream()
		if err != nil {
			return false
		}
		defer st.Close()
		_, err = echoLine(st, bufio.NewReader(st), "again")
		return err == nil
	}
	testutil.Until(t, 5*time.Second, "room for a stream after one closed", eventuallyEcho)
}

// TestServeYamuxBadFraming: a frame that is not yamux ends that connection
// with an error; yamux's own complaint goes to the logger at Warn.
func TestServeYamuxBadFraming(t *testing.T) {
	for _, tt := range []struct {
		name  string
		bytes string
	}{
		{"garbage after 0x00", "\x00garbage that is not a yamux header"},
		{"wrong version", "\x01\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server, client := unixPair(t)
			rec := new(socket.LogRecorder)
			done := make(chan error, 1)
			go func() {
				done <- socket.ServeYamux(t.Context(), server, socket.YamuxConfig{Logger: slog.New(rec)},
					func(_ context.Context, st net.Conn, _ uint32) { st.Close() })
			}()
			_, err := client.Write([]byte(tt.bytes))
			require.NoError(t, err)
			select {
			case err := <-done:
				assert.Error(t, err, "bad framing is reported")
			case <-time.After(10 * time.Second):
				t.Fatal("ServeYamux did not end on bad framing")
			}
			client.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.Copy(io.Discard, client)
			assert.NoError(t, err, "the connection is closed (EOF)")
			var yamuxLog []string
			for _, r := range rec.Records() {
				assert.Equal(t, slog.LevelWarn, r.Level, "yamux logs at Warn: %s", r.Msg)
				yamuxLog = append(yamuxLog, r.Msg)
			}
			if tt.name == "wrong version" {
				assert.Equal(t, []string{"[ERR] yamux: Invalid protocol version: 1"}, yamuxLog, "yamux's log, through the logger")
			}
		})
	}
}

// TestServeYamuxContext: ending ctx closes the connection and every stream,
// and ServeYamux returns nil once its handlers have.
func TestServeYamuxContext(t *testing.T) {
	ys := startYamux(t, 0)
	st, err := ys.client.OpenStream()
	require.NoError(t, err)
	_, err = echoLine(st, bufio.NewReader(st), "hi")
	require.NoError(t, err)
	ys.cancel()
	select {
	case err := <-ys.done:
		assert.NoError(t, err)
		ys.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("ServeYamux did not return after its context ended")
	}
	st.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = st.Read(make([]byte, 1))
	assert.Error(t, err, "the stream ends with the connection")
}

// yamuxFrame is one raw yamux frame header.
func yamuxFrame(typ byte, flags uint16, stream, length uint32) []byte {
	return []byte{0, typ, byte(flags >> 8), byte(flags), byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream),
		byte(length >> 24), byte(length >> 16), byte(length >> 8), byte(length)}
}

// TestServeYamuxPingFlood: a client that sends pings without reading the
// answers is closed once it passes the burst, with ErrControlFlood; the
// daemon's goroutines (the library answers each ping from one of its own)
// stay bounded meanwhile.
func TestServeYamuxPingFlood(t *testing.T) {
	server, client := unixPair(t)
	rec := new(socket.LogRecorder)
	before := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() {
		done <- socket.ServeYamux(t.Context(), server, socket.YamuxConfig{Logger: slog.New(rec)},
			func(_ context.Context, st net.Conn, _ uint32) { st.Close() })
	}()
	var flood []byte
	for i := range 20000 {
		flood = append(flood, yamuxFrame(2, 1, 0, uint32(i))...) // SYN ping
	}
	wrote := make(chan error, 1)
	go func() {
		client.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := client.Write(flood)
		wrote <- err
	}()
	var peak int
	select {
	case err := <-done:
		assert.ErrorIs(t, err, socket.ErrControlFlood)
	case <-time.After(10 * time.Second):
		t.Fatal("ServeYamux did not end the flood")
	}
	peak = runtime.NumGoroutine()
	assert.Less(t, peak-before, 2*socket.DefaultControlBurst, "goroutines left by the flood")
	assert.Error(t, <-wrote, "the connection is closed under the flooder")
}

// TestServeYamuxPingsWithinBudget: a client that pings now and then, as
// yamux's keepalive does, and even a burst of pings it waits for, keeps
// its connection.
func TestServeYamuxPingsWithinBudget(t *testing.T) {
	ys := startYamux(t, 0)
	for i := range socket.DefaultControlBurst / 2 {
		_, err := ys.client.Ping()
		require.NoError(t, err, "ping %d", i)
	}
	st, err := ys.client.OpenStream()
	require.NoError(t, err)
	defer st.Close()
	got, err := echoLine(st, bufio.NewReader(st), "still here")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d still here", st.StreamID()), got)
}

// TestYamuxLoggerLimitsLikeLines: yamux writes a line for each frame for a
// stream that does not exist; through YamuxLogger a run of them is one line
// (the count follows when the interval ends).
func TestYamuxLoggerLimitsLikeLines(t *testing.T) {
	server, client := unixPair(t)
	rec := new(socket.LogRecorder)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		done <- socket.ServeYamux(ctx, server, socket.YamuxConfig{Logger: socket.YamuxLogger(slog.New(rec))},
			func(_ context.Context, st net.Conn, _ uint32) { st.Close() })
	}()
	var frames []byte
	for i := range 50 {
		frames = append(frames, yamuxFrame(1, 0, uint32(2*i+101), 1)...) // a window update for a stream never opened
	}
	_, err := client.Write(frames)
	require.NoError(t, err)
	// A ping that is answered: every frame before it was read.
	_, err = client.Write(yamuxFrame(2, 1, 0, 7))
	require.NoError(t, err)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	ack := make([]byte, 12)
	_, err = io.ReadFull(client, ack)
	require.NoError(t, err)
	assert.Equal(t, yamuxFrame(2, 2, 0, 7), ack, "the ping's answer")
	var missing []string
	for _, r := range rec.Records() {
		if strings.Contains(r.Msg, "frame for missing stream") {
			missing = append(missing, r.Msg)
		}
	}
	assert.Len(t, missing, 1, "one line for 50 frames for missing streams: %q", missing)
	cancel()
	<-done
}
