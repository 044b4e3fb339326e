package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/socket"
)

const bridgeWithin = 10 * time.Second

// fakeDaemon is a server's socket the test plays the daemon on: each
// connection the bridge opens is handed to the test.
type fakeDaemon struct {
	t     *testing.T
	path  string
	l     net.Listener
	conns chan *fakeConn
}

type fakeConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	path := filepath.Join(testutil.ShortDir(t), "demo.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	f := &fakeDaemon{t: t, path: path, l: l, conns: make(chan *fakeConn, 16)}
	done := make(chan struct{})
	go func() { // ended by closing the listener, waited for at cleanup
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.conns <- &fakeConn{t: t, conn: c, r: bufio.NewReader(c)}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		close(f.conns)
		for c := range f.conns {
			c.conn.Close()
		}
	})
	return f
}

// accept returns the next connection the bridge opened.
func (f *fakeDaemon) accept() *fakeConn {
	f.t.Helper()
	select {
	case c := <-f.conns:
		f.t.Cleanup(func() { c.conn.Close() })
		return c
	case <-time.After(bridgeWithin):
		f.t.Fatal("the bridge opened no connection")
		return nil
	}
}

// read returns the next line the bridge sent, without its newline.
func (c *fakeConn) read() string {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(bridgeWithin))
	line, err := c.r.ReadString('\n')
	require.NoError(c.t, err, "read from the bridge")
	return strings.TrimSuffix(line, "\n")
}

func (c *fakeConn) write(lines ...string) {
	c.t.Helper()
	for _, l := range lines {
		_, err := io.WriteString(c.conn, l+"\n")
		require.NoError(c.t, err)
	}
}

// answer answers the request line with result.
func (c *fakeConn) answer(line, result string) {
	c.t.Helper()
	m, err := jsonrpc.Parse([]byte(line))
	require.NoError(c.t, err, "%s", line)
	c.write(string(jsonrpc.Response(m.ID, json.RawMessage(result))))
}

// testBridge is a bridge over pipes to a fakeDaemon, run until the test
// ends.
type testBridge struct {
	t      *testing.T
	stdin  *io.PipeWriter
	stdout *bufio.Reader
	stderr testutil.Buffer
	done   chan error // run's result
}

func startTestBridge(t *testing.T, f *fakeDaemon, reconnect time.Duration) (*testBridge, *fakeConn) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	tb := &testBridge{t: t, stdin: inW, stdout: bufio.NewReader(outR), done: make(chan error, 1)}
	dial := func(ctx context.Context) (net.Conn, string, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", f.path)
		return c, f.path, err
	}
	b := &bridge{name: "demo", drain: time.Second, reconnect: reconnect, dial: dial, stderr: &tb.stderr, out: bufio.NewWriter(outW)}
	conn, _, err := dial(t.Context())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // waited for at cleanup
		err := b.run(ctx, newLink(conn, f.path), inR)
		outW.Close()
		tb.done <- err
	}()
	t.Cleanup(func() {
		inW.Close() // ends the stdin reader
		cancel()
		go io.Copy(io.Discard, outR) // owned by the pipe: ends when outW closes
		select {
		case err := <-tb.done:
			tb.done <- err
		case <-time.After(bridgeWithin):
			t.Error("the bridge did not stop")
		}
	})
	return tb, f.accept()
}

func (tb *testBridge) send(lines ...string) {
	tb.t.Helper()
	for _, l := range lines {
		_, err := io.WriteString(tb.stdin, l+"\n")
		require.NoError(tb.t, err)
	}
}

// read returns the next line the client got, without its newline.
func (tb *testBridge) read() string {
	tb.t.Helper()
	got := make(chan string, 1)
	go func() { // ends with a line or the pipe's end, which cleanup brings
		line, _ := tb.stdout.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		require.True(tb.t, strings.HasSuffix(line, "\n"), "stdout ended: %q; stderr: %s", line, tb.stderr.String())
		return strings.TrimSuffix(line, "\n")
	case <-time.After(bridgeWithin):
		tb.t.Fatalf("nothing on stdout; stderr: %s", tb.stderr.String())
		return ""
	}
}

// result waits for run to return.
func (tb *testBridge) result() error {
	tb.t.Helper()
	select {
	case err := <-tb.done:
		tb.done <- err
		return err
	case <-time.After(bridgeWithin):
		tb.t.Fatal("the bridge did not stop")
		return nil
	}
}

const (
	legacyInit  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`
	initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	initResult  = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"serverInfo":{"name":"fake","version":"1"}}`
)

func daemonGone(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"the mcpmux daemon closed the session with this request in flight; mcpmux connect is reconnecting","data":{"reason":"daemon_gone","server":"demo"}}}`
}

// TestBridgeReplaysLegacySession: when the daemon closes the session of a
// legacy client, the request in flight is answered with its id, and the
// new session hears the client's initialize (under an id of the bridge's,
// its answer kept from the client), notifications/initialized, log level
// and subscriptions; the client is told of the lists the new session has,
// and its next request goes to it.
func TestBridgeReplaysLegacySession(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, bridgeWithin)
	setLevel := `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`
	sub := `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///a"}}`
	b.send(legacyInit, initialized, setLevel, sub)
	c1.answer(c1.read(), initResult)
	assert.Equal(t, initialized, c1.read())
	c1.answer(c1.read(), `{}`)
	c1.answer(c1.read(), `{}`)
	for _, id := range []string{"1", "2", "3"} {
		m, err := jsonrpc.Parse([]byte(b.read()))
		require.NoError(t, err)
		assert.Equal(t, id, string(m.ID), "the client gets its answers")
	}
	b.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"x"}}`)
	c1.read()
	c1.conn.Close()
	assert.Equal(t, daemonGone(`"call"`), b.read(), "the request in flight is answered with its id")

	c2 := f.accept()
	assert.JSONEq(t, strings.Replace(legacyInit, `"id":1`, `"id":"mcpmux-connect-replay-1"`, 1), c2.read(), "the client's initialize, under the bridge's id")
	c2.answer(`{"jsonrpc":"2.0","id":"mcpmux-connect-replay-1","method":"initialize"}`, initResult)
	assert.Equal(t, initialized, c2.read(), "then its notifications/initialized")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"mcpmux-connect-replay-2","method":"logging/setLevel","params":{"level":"debug"}}`, c2.read())
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"mcpmux-connect-replay-3","method":"resources/subscribe","params":{"uri":"file:///a"}}`, c2.read())
	c2.write(`{"jsonrpc":"2.0","id":"mcpmux-connect-replay-2","result":{}}`, `{"jsonrpc":"2.0","id":"mcpmux-connect-replay-3","result":{}}`)
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, b.read())
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`, b.read())

	b.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	next := c2.read()
	assert.Equal(t, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, next, "the next request goes to the new session")
	c2.answer(next, `{"tools":[]}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":4,"result":{"tools":[]}}`, b.read(), "its answer, with no replayed answer before it")
	// Said once the new link is up, which may be just after its first answer.
	testutil.Until(t, bridgeWithin, "the bridge says it reconnected", func() bool {
		return strings.Contains(b.stderr.String(), "reconnected to "+f.path)
	})
}

// TestBridgeModernClient: a client whose first request carried the
// 2026-07-28 envelope set nothing up: nothing is replayed and no list
// change is made up; its next request simply goes to the new session.
func TestBridgeModernClient(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, bridgeWithin)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	b.send(call)
	c1.answer(c1.read(), `{"tools":[]}`)
	b.read()
	c1.conn.Close()
	c2 := f.accept()
	b.send(strings.Replace(call, `"id":1`, `"id":2`, 1))
	assert.Equal(t, strings.Replace(call, `"id":1`, `"id":2`, 1), c2.read(), "the client's own request comes first")
	c2.answer(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, `{"tools":[]}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`, b.read(), "answered, with nothing before it")
}

// TestBridgeHoldsWhileReconnecting: a request sent while the bridge has no
// session waits for the next one, after what is replayed.
func TestBridgeHoldsWhileReconnecting(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, bridgeWithin)
	b.send(legacyInit)
	c1.answer(c1.read(), initResult)
	b.read()
	c1.conn.Close()
	c2 := f.accept()
	replayed := c2.read()
	b.send(`{"jsonrpc":"2.0","id":7,"method":"ping"}`) // while the replay waits for its answer
	c2.answer(replayed, initResult)
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, b.read())
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`, b.read())
	assert.Equal(t, `{"jsonrpc":"2.0","id":7,"method":"ping"}`, c2.read(), "the held request, after the replay")
}

// TestBridgeRefused: a daemon that refuses the session (too_many_sessions)
// makes the bridge answer the requests in flight with that error and exit
// saying why; it does not try again.
func TestBridgeRefused(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, bridgeWithin)
	b.send(legacyInit)
	c1.read()
	c1.write(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"server demo has its maximum of 1 sessions","data":{"reason":"too_many_sessions","server":"demo"}}}`)
	c1.conn.Close()
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"server demo has its maximum of 1 sessions","data":{"reason":"too_many_sessions","server":"demo"}}}`, b.read())
	err := b.result()
	assert.EqualError(t, err, "server demo refused the session on "+f.path+": server demo has its maximum of 1 sessions (too_many_sessions)")
	rest, _ := io.ReadAll(b.stdout)
	assert.Empty(t, string(rest), "nothing more on stdout")
	select {
	case <-f.conns:
		t.Error("the bridge connected again after a refusal")
	default:
	}
}

// TestBridgeRefusedWhileDraining: a refusal that arrives after the client
// closed stdin is named as the refusal, not as daemon_gone answers.
func TestBridgeRefusedWhileDraining(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, bridgeWithin)
	b.send(legacyInit)
	c1.read()
	require.NoError(t, b.stdin.Close())
	c1.write(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"server demo has its maximum of 1 sessions","data":{"reason":"too_many_sessions","server":"demo"}}}`)
	c1.conn.Close()
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"server demo has its maximum of 1 sessions","data":{"reason":"too_many_sessions","server":"demo"}}}`, b.read())
	assert.EqualError(t, b.result(), "server demo refused the session on "+f.path+": server demo has its maximum of 1 sessions (too_many_sessions)")
}

// TestBridgeGivesUp: with no daemon to reach, the bridge gives up after
// the reconnect bound, saying so.
func TestBridgeGivesUp(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, 300*time.Millisecond)
	b.send(legacyInit)
	c1.read()
	f.l.Close()
	c1.conn.Close()
	assert.Equal(t, daemonGone("1"), b.read())
	start := time.Now()
	err := b.result()
	rest, _ := io.ReadAll(b.stdout)
	assert.Empty(t, string(rest), "nothing more on stdout")
	took := time.Since(start)
	require.Error(t, err)
	assert.Regexp(t, `^gave up reconnecting to server demo after \d+ attempts in 300ms: `, err.Error())
	assert.Less(t, took, 3*time.Second, "the bound is kept")
	var ne *net.OpError
	assert.True(t, errors.As(err, &ne), "the last error is the dial's: %v", err)
	t.Logf("gave up after %v: %v", took.Round(time.Millisecond), err)
}

// A daemon that closes a connection the client has not used yet (its
// first_byte_timeout) is reached again quietly, even with --reconnect 0:
// nothing was in flight, nothing is said on stderr, and the client's first
// message, sent later, goes out on the new connection and is answered.
func TestBridgeRedialsASilentLinkQuietly(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, 0)
	c1.conn.Close() // the daemon's first_byte_timeout
	c2 := f.accept()
	b.send(legacyInit)
	line := c2.read()
	assert.JSONEq(t, legacyInit, line, "the client's own initialize, once, not a replay")
	c2.answer(line, initResult)
	assert.Contains(t, b.read(), `"serverInfo"`)
	assert.Empty(t, b.stderr.String(), "nothing was lost: nothing said")
}

// A daemon that closes a connection just as the client's first message
// reaches it (its first_byte_timeout fired on a starved machine), without
// reading it, is reached again quietly, even with --reconnect 0, and the
// message goes out again on the new connection and is answered: the
// client is slow, and nothing of it was lost.
func TestBridgeResendsWhatAClosedLinkNeverRead(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, 0)
	b.send(legacyInit)
	testutil.Until(t, bridgeWithin, "the initialize waits, unread, at the daemon's end", func() bool { return socket.Waiting(c1.conn) })
	c1.conn.Close() // unread: the bridge's next read is reset
	initResent(t, f, b)
}

// initResent: the daemon's next connection gets the client's own
// initialize again, its answer reaches the client, and the bridge says
// nothing of a loss.
func initResent(t *testing.T, f *fakeDaemon, b *testBridge) {
	t.Helper()
	c := f.accept()
	line := c.read()
	assert.JSONEq(t, legacyInit, line, "the client's own initialize, again")
	c.answer(line, initResult)
	assert.Contains(t, b.read(), `"serverInfo"`)
	assert.Empty(t, b.stderr.String(), "nothing was lost: nothing said")
}

// A client's first line that goes out on a link just after the daemon
// ended it, silent (its first_byte_timeout), and before the bridge retired
// the link, was never read: it goes out again on the next link, quietly,
// even with --reconnect 0, and is answered (it used to be answered
// daemon_gone). The daemon here only shuts its side for writing, so that
// the line's write succeeds and lies unread, as it does when it crosses
// the daemon's close.
func TestBridgeResendsWhatCrossedASilentClose(t *testing.T) {
	f := newFakeDaemon(t)
	bridges := make(chan *testBridge, 1)
	var once sync.Once
	testHookEnded = func(l *link) {
		once.Do(func() { // the first link's end
			b := <-bridges
			b.send(legacyInit)
			testutil.Until(t, bridgeWithin, "the line goes out on the ended link", func() bool { return l.wrote.Load() })
		})
	}
	t.Cleanup(func() { testHookEnded = nil }) // after the bridge's own cleanup, which waits for it
	b, c1 := startTestBridge(t, f, 0)
	bridges <- b
	require.NoError(t, c1.conn.(*net.UnixConn).CloseWrite())
	initResent(t, f, b)
	c1.conn.Close()
}
