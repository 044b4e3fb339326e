package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/socket"
)

// dialYamux connects to a server's socket as a yamux client (its first
// frame starts with the byte 0x00); the session is closed at cleanup.
func dialYamux(tb testing.TB, path string) *yamux.Session {
	tb.Helper()
	conn, err := net.DialTimeout("unix", path, ioTimeout)
	require.NoError(tb, err, "dial %s", path)
	sess, err := socket.DialYamux(conn, 0) // patient, as mcpmux connect is

	require.NoError(tb, err)
	tb.Cleanup(func() { sess.Close() })
	return sess
}

// yamuxStreamClient opens a stream: one MCP session, driven like a socket.
func yamuxStreamClient(tb testing.TB, sess *yamux.Session) *client {
	tb.Helper()
	c, err := openStreamClient(sess)
	require.NoError(tb, err, "open a yamux stream")
	tb.Cleanup(func() { c.close() })
	return c
}

func openStreamClient(sess *yamux.Session) (*client, error) {
	st, err := sess.OpenStream()
	if err != nil {
		return nil, err
	}
	return &client{conn: st, r: jsonrpc.NewReader(st, readLimit)}, nil
}

// TestYamux20Streams: twenty streams on one connection each initialize and
// pipeline twenty requests under the same ids; every answer reaches its
// own stream, and the server behind them is the one every session shares.
func TestYamux20Streams(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	sess := dialYamux(t, d.socket("demo"))
	const streams, perStream = 20, 20
	ids := collidingIDs(perStream)
	errs := make([]error, streams)
	pids := make([]int, streams)
	var wg sync.WaitGroup
	for s := range streams {
		wg.Go(func() {
			c, err := openStreamClient(sess)
			if err != nil {
				errs[s] = err
				return
			}
			defer c.close()
			if _, err := c.initialize("2025-06-18"); err != nil {
				errs[s] = err
				return
			}
			if errs[s] = pipelineClient(c, fmt.Sprintf("stream %d", s), ids); errs[s] != nil {
				return
			}
			st, err := c.stats()
			pids[s], errs[s] = st.PID, err
		})
	}
	wg.Wait()
	for s := range streams {
		require.NoError(t, errs[s], "stream %d", s)
	}
	plain := open(t, d.socket("demo"))
	pid := plain.mustStats(t).PID
	for s := range streams {
		assert.Equal(t, pid, pids[s], "stream %d reached another process", s)
	}
	assert.Regexp(t, `transport=yamux peer="pid \d+ uid \d+ stream \d+"`, d.log(), "sessions name their stream")
}

// TestYamuxStreamCloseCancels: closing one stream cancels that stream's
// requests upstream, and only those: the other stream's request, on the
// same connection, completes.
func TestYamuxStreamCloseCancels(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	sess := dialYamux(t, d.socket("demo"))
	stats := yamuxStreamClient(t, sess)
	a, b := yamuxStreamClient(t, sess), yamuxStreamClient(t, sess)
	for _, c := range []*client{stats, a, b} {
		_, err := c.initialize("2025-06-18")
		require.NoError(t, err)
	}
	require.NoError(t, a.send(slowCall("7", 10000, 0, `"a"`)))
	upA := inFlight(t, stats, 1)[0]
	require.NoError(t, b.send(slowCall("7", 1500, 0, `"b"`)))
	upB := inFlight(t, stats, 2)[1]
	require.NotEqual(t, string(upA), string(upB))

	require.NoError(t, a.close())
	delay := testutil.Eventually(t, 5*time.Second, "the server sees A's request cancelled", func() (bool, error) {
		st, err := stats.stats()
		return err == nil && len(st.Aborted) > 0, err
	})
	t.Logf("cancellation reached the server %v after the stream closed", delay.Round(time.Millisecond))
	st := stats.mustStats(t)
	assert.Equal(t, []json.RawMessage{upA}, st.Cancelled, "cancellations the server received")
	assert.Equal(t, []json.RawMessage{upA}, st.Aborted, "requests a cancellation stopped")

	m, _, err := b.await("7")
	require.NoError(t, err)
	text, err := resultText(m)
	require.NoError(t, err, "B's request completes")
	assert.Equal(t, "waited 1500 ms", text)
	assert.Equal(t, []json.RawMessage{upA}, stats.mustStats(t).Cancelled, "nothing else was cancelled")
}

// TestYamuxBadFirstFrame: a connection whose first byte is 0x00 but whose
// first frame is garbage is closed, alone: another yamux connection and a
// plain one on the same socket keep working.
func TestYamuxBadFirstFrame(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	good := yamuxStreamClient(t, dialYamux(t, d.socket("demo")))
	_, err := good.initialize("2025-06-18")
	require.NoError(t, err)
	plain := open(t, d.socket("demo"))

	bad, err := net.DialTimeout("unix", d.socket("demo"), ioTimeout)
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Write([]byte("\x00this is not a yamux header\n"))
	require.NoError(t, err)
	bad.SetReadDeadline(time.Now().Add(ioTimeout))
	n, err := io.Copy(io.Discard, bad)
	require.NoError(t, err, "the daemon closes the bad connection")
	assert.Zero(t, n, "and sends it nothing")

	require.NoError(t, good.echo("1", "still here"), "the other yamux connection")
	require.NoError(t, plain.echo("1", "still here"), "the plain connection")
	fresh := yamuxStreamClient(t, dialYamux(t, d.socket("demo")))
	_, err = fresh.initialize("2025-06-18")
	require.NoError(t, err, "a new yamux connection")
	// The daemon logs it once the connection is closed: it may come after the checks above.
	testutil.Until(t, ioTimeout, "the bad connection is logged", func() bool {
		return strings.Contains(d.log(), "closed a yamux connection that broke the framing")
	})
}

// TestYamuxMaxStreamsPerConn: a stream over max_streams_per_conn is closed
// and logged; the streams within the limit go on.
func TestYamuxMaxStreamsPerConn(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "max_streams_per_conn = 2")
	sess := dialYamux(t, d.socket("demo"))
	var admitted []*client
	for range 2 {
		c := yamuxStreamClient(t, sess)
		_, err := c.initialize("2025-06-18")
		require.NoError(t, err)
		admitted = append(admitted, c)
	}
	over := yamuxStreamClient(t, sess)
	over.send(request("1", "ping", nil))
	_, err := over.readFrame()
	assert.ErrorIs(t, err, io.EOF, "the stream over the limit is closed")
	for i, c := range admitted {
		require.NoError(t, c.echo("1", "within the limit"), "stream %d", i)
	}
	assert.Equal(t, 1, strings.Count(d.log(), "refused a yamux stream: max_streams_per_conn reached"))
}

// TestYamuxConnect: `mcpmux connect --yamux` bridges stdin and stdout over
// one yamux stream.
func TestYamuxConnect(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	echo := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, yamux"}}}`
	r := runConnect(t, d.path, initializeLine+"\n"+echo+"\n", "--yamux", "demo")
	require.Equal(t, 0, r.code, "exit code; stderr: %s", r.stderr)
	assert.Empty(t, r.stderr)
	msgs := parseLines(t, r.stdout)
	require.Len(t, msgs, 2, "stdout: %s", r.stdout)
	byID := map[string]*jsonrpc.Message{}
	for _, m := range msgs {
		byID[string(m.ID)] = m
	}
	require.Contains(t, byID, "1")
	require.Contains(t, byID, "2")
	assert.Equal(t, jsonrpc.KindResult, byID["1"].Kind)
	text, err := resultText(byID["2"])
	require.NoError(t, err)
	assert.Equal(t, "hello, yamux", text)
	assert.Regexp(t, `transport=yamux`, d.log(), "the session came over yamux")
}
