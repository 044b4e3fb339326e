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
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// Waits in these tests: positive ones are generous (they return as soon as
// the thing happens); negative ones ("nothing arrives") are short.
const (
	waitLong  = 10 * time.Second
	waitShort = 200 * time.Millisecond
)

// connType makes a connected pair: the server end goes to the session, the
// client end to the test. As yamux's testConnTypes, every behaviour that
// does not depend on kernel buffering runs over each.
type connType struct {
	name string
	pair func(t testing.TB) (server, client net.Conn)
}

var connTypes = []connType{
	{"socketpair", socketPair},
	{"pipe", pipePair},
}

// socketPair is a connected pair of Unix stream sockets, each a
// *net.UnixConn, as an accepted connection on the daemon's socket is.
func socketPair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err, "socketpair")
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fileConn(t, fds[0], "server"), fileConn(t, fds[1], "client")
}

func fileConn(t testing.TB, fd int, name string) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), name)
	defer f.Close() // FileConn dups the descriptor
	c, err := net.FileConn(f)
	require.NoError(t, err, "FileConn(%s)", name)
	return c
}

// pipePair is net.Pipe: synchronous, no buffer at all, so a writer blocks
// until the other side reads.
func pipePair(testing.TB) (server, client net.Conn) { return net.Pipe() }

// event is one call into the fake handler.
type event struct {
	batch bool
	msg   *jsonrpc.Message // HandleMessage
	frame []byte           // HandleBatch
	tag   uint64
}

// fakeHandler records what the session hands it, in order. Its hooks run
// after the event is recorded.
type fakeHandler struct {
	events    chan event
	onMessage func(s *session.Session, m *jsonrpc.Message)
	onBatch   func(s *session.Session, frame []byte)
	waitRoom  func(ctx context.Context) error
}

func newFakeHandler() *fakeHandler {
	return &fakeHandler{events: make(chan event, 1<<14)}
}

func (f *fakeHandler) HandleMessage(s *session.Session, m *jsonrpc.Message, tag uint64) {
	f.events <- event{msg: m, tag: tag}
	if f.onMessage != nil {
		f.onMessage(s, m)
	}
}

func (f *fakeHandler) HandleBatch(s *session.Session, frame []byte, tag uint64) {
	f.events <- event{batch: true, frame: frame, tag: tag}
	if f.onBatch != nil {
		f.onBatch(s, frame)
	}
}

func (f *fakeHandler) WaitRoom(ctx context.Context) error {
	if f.waitRoom != nil {
		return f.waitRoom(ctx)
	}
	return nil
}

// Flush implements session.Handler: the fake holds nothing back.
func (f *fakeHandler) Flush() {}

// next returns the handler's next event, failing the test if none comes.
func (f *fakeHandler) next(t *testing.T, what string) event {
	t.Helper()
	select {
	case e := <-f.events:
		return e
	case <-time.After(waitLong):
		require.FailNow(t, "handler got nothing", "waiting for %s", what)
		return event{}
	}
}

// nextMessage returns the next event, which must be a message.
func (f *fakeHandler) nextMessage(t *testing.T, what string) *jsonrpc.Message {
	t.Helper()
	e := f.next(t, what)
	require.False(t, e.batch, "%s: got a batch %q", what, e.frame)
	return e.msg
}

// none asserts that nothing reaches the handler for waitShort: the
// negative half of a flow-control test.
func (f *fakeHandler) none(t *testing.T, why string) {
	t.Helper()
	select {
	case e := <-f.events:
		if e.batch {
			require.FailNow(t, "handler got a batch it should not have", "%s: %q", why, e.frame)
		}
		require.FailNow(t, "handler got a message it should not have", "%s: %q", why, e.msg.Frame)
	case <-time.After(waitShort):
	}
}

// harness is one session under test with the test as its client.
type harness struct {
	t      *testing.T
	sess   *session.Session
	h      *fakeHandler
	server net.Conn
	client net.Conn
	br     *bufio.Reader // the client's reader
	cancel context.CancelFunc
	runErr chan error // Run's result, once

	out     chan []byte // frames for the client's writer goroutine
	writeWG sync.WaitGroup
}

// start runs a session over a fresh pair until the test ends. maxBytes is
// the Stream's frame limit (0: 1 MiB).
func start(t *testing.T, ct connType, cfg session.Config, h *fakeHandler, maxBytes int) *harness {
	t.Helper()
	watchdog(t)
	if maxBytes == 0 {
		maxBytes = 1 << 20
	}
	if cfg.Server == "" {
		cfg.Server = "srv"
	}
	server, client := ct.pair(t)
	ctx, cancel := context.WithCancel(t.Context())
	hs := &harness{
		t:      t,
		sess:   session.New(cfg, session.NewStream(server, maxBytes)),
		h:      h,
		server: server,
		client: client,
		br:     bufio.NewReaderSize(client, 64<<10),
		cancel: cancel,
		runErr: make(chan error, 1),
		out:    make(chan []byte, 1<<12),
	}
	go func() { hs.runErr <- hs.sess.Run(ctx, h) }()
	// The client's writes go through one goroutine, so that a test can keep
	// writing to a session that does not read (net.Pipe blocks the writer).
	hs.writeWG.Go(func() {
		for frame := range hs.out {
			if _, err := client.Write(frame); err != nil {
				for range hs.out { // drain; the test is ending or checks elsewhere
				}
				return
			}
		}
	})
	t.Cleanup(hs.stop)
	return hs
}

// stop ends everything start began, even when the session hangs (then it
// fails the test and forces the connection closed).
func (hs *harness) stop() {
	hs.cancel()
	select {
	case <-hs.runErr:
	case <-time.After(waitLong):
		hs.t.Errorf("Run did not return %v after its context was cancelled", waitLong)
		hs.server.Close()
		hs.client.Close()
		<-hs.runErr
	}
	hs.client.Close()
	close(hs.out)
	hs.writeWG.Wait()
}

// send queues lines for the client's writer, a newline after each.
func (hs *harness) send(lines ...string) {
	for _, l := range lines {
		hs.out <- []byte(l + "\n")
	}
}

// readLine reads the client's next line, without its newline.
func (hs *harness) readLine(what string) []byte {
	hs.t.Helper()
	require.NoError(hs.t, hs.client.SetReadDeadline(time.Now().Add(waitLong)))
	line, err := hs.br.ReadBytes('\n')
	require.NoError(hs.t, err, "client reading %s", what)
	return line[:len(line)-1]
}

// answer is what the tests compare of a response: the whole of it, less the
// human-readable message.
type answer struct {
	JSONRPC string
	ID      string // raw JSON
	Result  string // raw JSON; "" when absent
	Code    int
	Reason  string
	Server  string
}

func decodeAnswer(t *testing.T, line []byte) answer {
	t.Helper()
	var w struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Reason string `json:"reason"`
				Server string `json:"server"`
			} `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(line, &w), "decoding answer %q", line)
	a := answer{JSONRPC: w.JSONRPC, ID: string(w.ID), Result: string(w.Result)}
	if w.Error != nil {
		a.Code, a.Reason, a.Server = w.Error.Code, w.Error.Data.Reason, w.Error.Data.Server
		require.NotEmpty(t, w.Error.Message, "error message of %q", line)
	}
	return a
}

func (hs *harness) readAnswer(what string) answer {
	hs.t.Helper()
	return decodeAnswer(hs.t, hs.readLine(what))
}

// errAnswer is the answer the session itself gives.
func errAnswer(id string, code int, reason string) answer {
	return answer{JSONRPC: "2.0", ID: id, Code: code, Reason: reason, Server: "srv"}
}

// wait returns Run's result, failing the test if it does not come.
func (hs *harness) wait(why string) error {
	hs.t.Helper()
	select {
	case err := <-hs.runErr:
		hs.runErr <- err // for stop
		return err
	case <-time.After(waitLong):
		require.FailNow(hs.t, "Run did not return", "after %s", why)
		return nil
	}
}

// waitDone fails the test unless the session's Done closes.
func (hs *harness) waitDone(why string) {
	hs.t.Helper()
	select {
	case <-hs.sess.Done():
	case <-time.After(waitLong):
		require.FailNow(hs.t, "Done did not close", "after %s", why)
	}
}

// drainToEOF reads the client side until it sees EOF: the session's end of
// the connection is closed.
func (hs *harness) drainToEOF(why string) {
	hs.t.Helper()
	// net.Pipe refuses a deadline once the other end is closed; its reads
	// then return EOF at once.
	_ = hs.client.SetReadDeadline(time.Now().Add(waitLong))
	_, err := io.Copy(io.Discard, hs.br)
	require.NoError(hs.t, err, "client should read to EOF: the transport must be closed after %s", why)
}

// request is a request frame with a raw id.
func request(id, method string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q}`, id, method)
}

// result is a result frame with a raw id and a result padded to about size
// bytes.
func result(id string, size int) []byte {
	pad := bytes.Repeat([]byte{'x'}, max(size-40, 0)) // no per-byte loop: -race makes those slow
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"pad":"%s"}}`, id, pad)
}

// echo answers each request with a small result carrying its id.
func echo(s *session.Session, m *jsonrpc.Message) {
	if m.Kind == jsonrpc.KindRequest {
		s.Send(outbox.Frame{Data: jsonrpc.Response(m.ID, json.RawMessage(`"ok"`))})
	}
}
