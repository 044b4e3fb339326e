package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// fakeServer is an in-process MCP server behind the process interface: the
// hub tests drive the router without spawning anything.
type fakeServer struct {
	mu        sync.Mutex
	received  []*jsonrpc.Message // every message the hub sent, in order
	procs     []*fakeProc
	caps      string // capabilities JSON of the InitializeResult
	version   string
	crashInit bool               // die on initialize, for crash loops
	lastArgs  []string           // the Args of the last start
	dirs      []string           // the Dir of each start
	deaf      bool               // answer nothing at all, for liveness pings
	era       string             // "" (legacy only), "dual" or "modern": see fakemodern_test.go
	initGate  chan struct{}      // when set, initialize is answered once it is closed: a slow starter
	held      []*jsonrpc.Message // "held" calls not answered yet
	maxHeld   int                // the most "held" calls at once
	inCap     int                // frames its stdin holds (Send refuses more: upstream.ErrQueueFull); 0: 1<<16
	callGate  chan struct{}      // when set, the first tools/call waits for it to close: stdin fills meanwhile
	lists     map[string]string  // method -> result of the lists it answers (see lists_test.go); others: method not found
	listFirst bool               // write a list's "result" before its "id", as the TypeScript SDK does
	listenEnd string             // modern: "" keeps listens open; "answer" ends each at once, "refuse" answers it with an error
}

func newFakeServer() *fakeServer {
	return &fakeServer{
		caps:    `{"tools":{},"prompts":{"listChanged":false},"resources":{"subscribe":true},"tasks":{"list":{},"cancel":{}}}`,
		version: "2025-11-25",
	}
}

func (f *fakeServer) start(cfg upstream.Config, h upstream.Handler) (process, error) {
	f.mu.Lock()
	f.lastArgs = cfg.Args
	f.dirs = append(f.dirs, cfg.Dir)
	f.mu.Unlock()
	inCap := 1 << 16
	if f.inCap > 0 {
		inCap = f.inCap
	}
	p := &fakeProc{srv: f, h: h, in: make(chan []byte, inCap), done: make(chan struct{}), kill: make(chan string, 1), gate: f.callGate}
	f.mu.Lock()
	f.procs = append(f.procs, p)
	p.pid = len(f.procs)
	f.mu.Unlock()
	go p.run()
	return p, nil
}

// count returns how many received messages satisfy keep.
func (f *fakeServer) count(keep func(*jsonrpc.Message) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.received {
		if keep(m) {
			n++
		}
	}
	return n
}

func (f *fakeServer) messages(method string) []*jsonrpc.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*jsonrpc.Message
	for _, m := range f.received {
		if m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

func (f *fakeServer) current() *fakeProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[len(f.procs)-1]
}

type fakeProc struct {
	srv  *fakeServer
	h    upstream.Handler
	pid  int
	in   chan []byte
	done chan struct{}
	kill chan string
	gate chan struct{} // the first tools/call waits for it (fakeServer.callGate); the run loop's alone

	closed atomic.Bool
	exit   upstream.Exit

	nextAsk  int
	asks     map[string]*jsonrpc.Message // the fake's own requests to its client -> the request that caused them
	multi    map[string][]string         // the answers so far to the asks of each "multi" request, by its id
	listenMu sync.Mutex
	listens  map[string]*jsonrpc.Message // open subscriptions/listen requests, by id (modern)

	// replyMu makes the fake's answers one stream, as a real server's
	// stdout is read by one goroutine.
	replyMu sync.Mutex
}

func (p *fakeProc) Pid() int { return p.pid }

func (p *fakeProc) Send(frame []byte) error {
	if p.closed.Load() {
		return upstream.ErrClosed
	}
	select {
	case p.in <- frame:
		return nil
	default:
		return upstream.ErrQueueFull
	}
}

// SendLater and Flush: the fake takes every frame at once.
func (p *fakeProc) SendLater(frame []byte) error { return p.Send(frame) }
func (p *fakeProc) Flush()                       {}

// SendLaterWait waits for room in the fake's stdin.
func (p *fakeProc) SendLaterWait(stop <-chan struct{}, frame []byte) error {
	if p.closed.Load() {
		return upstream.ErrClosed
	}
	select {
	case p.in <- frame:
		return nil
	case <-p.done:
		return upstream.ErrClosed
	case <-stop:
		return upstream.ErrStopped
	}
}

func (p *fakeProc) WaitWritable(ctx context.Context) error { return nil }
func (p *fakeProc) Kill(reason string)                     { p.crash(reason) }
func (p *fakeProc) StderrTail() []string                   { return nil }
func (p *fakeProc) Done() <-chan struct{}                  { return p.done }
func (p *fakeProc) Closed() bool                           { return p.closed.Load() }
func (p *fakeProc) Exit() upstream.Exit                    { return p.exit }

func (p *fakeProc) Stop(ctx context.Context) error {
	p.crash("stopped")
	<-p.done
	return nil
}

// crash ends the process as if it died.
func (p *fakeProc) crash(reason string) {
	select {
	case p.kill <- reason:
	default:
	}
}

func (p *fakeProc) run() {
	defer close(p.done)
	for {
		select {
		case reason := <-p.kill:
			p.closed.Store(true)
			p.exit = upstream.Exit{Code: -1, Signal: "killed", Reason: reason}
			return
		case frame := <-p.in:
			m, err := jsonrpc.Parse(frame)
			if err != nil {
				panic(fmt.Sprintf("hub sent an invalid frame %q: %v", frame, err))
			}
			if m.Method == "tools/call" && p.gate != nil {
				select {
				case <-p.gate:
					p.gate = nil
				case reason := <-p.kill:
					p.closed.Store(true)
					p.exit = upstream.Exit{Code: -1, Signal: "killed", Reason: reason}
					return
				}
			}
			p.srv.mu.Lock()
			p.srv.received = append(p.srv.received, m)
			p.srv.mu.Unlock()
			switch m.Kind {
			case jsonrpc.KindRequest:
				p.answer(m)
			case jsonrpc.KindResult, jsonrpc.KindError:
				p.answered(m)
			case jsonrpc.KindNotification:
				if m.Method == "notifications/cancelled" {
					if s, ok := m.ParamsPath("requestId"); ok {
						p.dropListen(string(m.Frame[s.Start:s.End]))
					}
				}
			}
		}
	}
}

func (p *fakeProc) reply(frame []byte) {
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		panic(err)
	}
	p.replyMu.Lock()
	defer p.replyMu.Unlock()
	p.h.HandleMessage(m)
	p.h.Flush() // the real reader does before each read that may wait
}

// replyLine hands the hub a stdout line as the real reader would: a valid
// message, or the id of an invalid answer, or nothing (junk).
func (p *fakeProc) replyLine(line []byte) {
	p.replyMu.Lock()
	defer p.replyMu.Unlock()
	if m, err := jsonrpc.Parse(line); err == nil {
		p.h.HandleMessage(m)
	} else if id := jsonrpc.ResponseID(line); id != nil {
		p.h.HandleInvalidAnswer(id, err)
	}
	p.h.Flush()
}

// answer plays the server: the method says what to do.
func (p *fakeProc) answer(m *jsonrpc.Message) {
	p.srv.mu.Lock()
	crashInit, deaf, version, caps := p.srv.crashInit, p.srv.deaf, p.srv.version, p.srv.caps
	p.srv.mu.Unlock()
	if deaf && m.Method != "initialize" {
		return
	}
	if p.answerModern(m) {
		return
	}
	method := m.Method
	if method == "tools/call" { // tools/call {"name": X} plays method X
		var p struct {
			Name string `json:"name"`
		}
		json.Unmarshal(m.Params, &p)
		method = p.Name
	}
	switch method {
	case "initialize":
		if crashInit {
			p.crash("exited")
			return
		}
		p.srv.mu.Lock()
		gate := p.srv.initGate
		p.srv.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-p.kill:
				p.crash("killed while starting")
				return
			}
		}
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(fmt.Sprintf(
			`{"protocolVersion":%q,"capabilities":%s,"serverInfo":{"name":"fake","version":"1"}}`, version, caps))))
	case "echo":
		params := m.Params
		if params == nil {
			params = json.RawMessage("null")
		}
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"params":`+string(params)+`}`)))
	case "progress":
		span, ok := m.ParamsPath("_meta", "progressToken")
		if ok {
			tok := string(m.Frame[span.Start:span.End])
			for i := 1; i <= 3; i++ {
				p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":` + strconv.Itoa(i) + `,"total":3}}`))
			}
		}
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{}`)))
	case "nan":
		// Python's json.dumps(float("nan")): no JSON, but the id is readable.
		p.replyLine([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"x":NaN}}`))
	case "hang":
		// never answered
	case "held":
		p.srv.hold(m) // answered by releaseHeld
	case "big":
		var n struct {
			Bytes int `json:"bytes"`
		}
		json.Unmarshal(m.Params, &n)
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"text":"`+string(make([]byte, 0))+repeatX(n.Bytes)+`"}`)))
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		p.answerList(m)
	case "crash":
		p.crash("exited")
	case "sample", "elicit", "roots":
		// Ask the client something, and answer m with what it said.
		if p.asks == nil {
			p.asks = map[string]*jsonrpc.Message{}
		}
		p.nextAsk++
		id := fmt.Sprintf(`"ask-%d"`, p.nextAsk)
		p.asks[id] = m
		ask := map[string][2]string{
			"sample": {"sampling/createMessage", `{"messages":[],"maxTokens":5}`},
			"elicit": {"elicitation/create", `{"message":"name?","requestedSchema":{"type":"object"}}`},
			"roots":  {"roots/list", `{}`},
		}[method]
		askMethod, params := ask[0], ask[1]
		p.reply([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + askMethod + `","params":` + params + `}`))
	case "multi":
		// Ask the client three things at once, as the go-sdk's shim for a
		// legacy connection does, and answer m once all three are in.
		if p.asks == nil {
			p.asks = map[string]*jsonrpc.Message{}
		}
		for _, ask := range [][2]string{
			{"elicitation/create", `{"message":"name?","requestedSchema":{"type":"object"}}`},
			{"sampling/createMessage", `{"messages":[],"maxTokens":5}`},
			{"roots/list", `{}`},
		} {
			p.nextAsk++
			id := fmt.Sprintf(`"ask-%d"`, p.nextAsk)
			p.asks[id] = m
			p.reply([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + ask[0] + `","params":` + ask[1] + `}`))
		}
	case "task":
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"task":{"taskId":"t-`+string(m.ID)+`","status":"working"}}`)))
	case "tasks/get", "resources/subscribe", "resources/unsubscribe", "logging/setLevel":
		if method == "resources/subscribe" && strings.Contains(string(m.Params), "file:///held") {
			p.srv.hold(m) // answered by releaseHeld
			return
		}
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{}`)))
	default:
		p.reply((&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no " + m.Method}).Response(m.ID))
	}
}

// answered completes the request that caused one of the fake's own
// requests, embedding the client's answer.
func (p *fakeProc) answered(m *jsonrpc.Message) {
	orig := p.asks[string(m.ID)]
	if orig == nil {
		return
	}
	delete(p.asks, string(m.ID))
	body := m.Result
	if m.Kind == jsonrpc.KindError {
		body = json.RawMessage(`{"error":` + string(m.Error) + `}`)
	}
	if name, _ := jsonrpc.StringMember(orig.Params, "name"); name == "multi" {
		// Answered once the last of its three asks is: the answers in the
		// order they came.
		if p.multi == nil {
			p.multi = map[string][]string{}
		}
		id := string(orig.ID)
		p.multi[id] = append(p.multi[id], string(body))
		if len(p.multi[id]) == 3 {
			p.reply(jsonrpc.Response(orig.ID, json.RawMessage(`{"answers":[`+strings.Join(p.multi[id], ",")+`]}`)))
			delete(p.multi, id)
		}
		return
	}
	p.reply(jsonrpc.Response(orig.ID, json.RawMessage(`{"answer":`+string(body)+`}`)))
}

func repeatX(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

// harness runs a hub on a fake server for one test.
type harness struct {
	t   *testing.T
	hub *Hub
	srv *fakeServer
	ctx context.Context
	wg  sync.WaitGroup
}

func newHarness(t *testing.T, tweak func(*Config)) *harness {
	t.Helper()
	return newHarnessOn(t, newFakeServer(), tweak)
}

// newHarnessOn is newHarness with a fake server set up by the caller.
func newHarnessOn(t *testing.T, srv *fakeServer, tweak func(*Config)) *harness {
	t.Helper()
	cfg := Config{
		Name:           "fake",
		Upstream:       upstream.Config{MaxMessageBytes: 1 << 20},
		RestartBackoff: time.Millisecond,
		start:          srv.start,
		// Errors (a panic while handling a message, above all) go to the
		// test's log, so that a failure shows its cause.
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, hub: New(cfg), srv: srv, ctx: ctx}
	h.wg.Go(func() { h.hub.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		h.wg.Wait()
	})
	return h
}

// testLog writes to a test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// connect attaches a new session over a socket pair and returns the
// client's end.
func (h *harness) connect() *testClient {
	h.t.Helper()
	return h.pipe(func(conn net.Conn) {
		h.hub.Serve(h.ctx, session.NewStream(conn, h.hub.MaxMessageBytes()), session.Peer{Transport: "test"})
	})
}

// pipe makes a socket pair, hands one end to serve (in a goroutine the
// harness waits for) and returns the other as a client.
func (h *harness) pipe(serve func(net.Conn)) *testClient {
	h.t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(h.t, err)
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		require.NoError(h.t, err)
	}
	h.wg.Go(func() { serve(conns[0]) })
	c := &testClient{t: h.t, conn: conns[1], r: jsonrpc.NewReader(conns[1], 64<<20)}
	h.t.Cleanup(func() { c.conn.Close() })
	return c
}

// session connects and initializes a session.
func (h *harness) session(version string) *testClient {
	return h.sessionWith(version, `{}`)
}

// sessionWith connects and initializes a session that declares caps.
func (h *harness) sessionWith(version, caps string) *testClient {
	c := h.connect()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":` + caps + `,"clientInfo":{"name":"test","version":"0"}}}`)
	m := c.recv()
	require.Equal(h.t, jsonrpc.KindResult, m.Kind, "initialize answer: %s", m.Frame)
	// A ping round trip proves the notification was handled: the session is ready.
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":"ready?","method":"ping"}`)
	m = c.recv()
	require.Equal(h.t, `"ready?"`, string(m.ID), "%s", m.Frame)
	return c
}

// eventually polls cond until it holds, for at most 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Until(t, 5*time.Second, what, cond)
}

type testClient struct {
	t    *testing.T
	conn net.Conn
	r    *jsonrpc.Reader
	mu   sync.Mutex
}

func (c *testClient) send(lines ...string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range lines {
		_, err := c.conn.Write([]byte(l + "\n"))
		require.NoError(c.t, err)
	}
}

// recv reads the next message; it fails the test after 5 s.
func (c *testClient) recv() *jsonrpc.Message {
	c.t.Helper()
	frame, err := c.recvFrame()
	require.NoError(c.t, err)
	m, err := jsonrpc.Parse(frame)
	require.NoError(c.t, err, "mcpmux sent an invalid frame: %s", frame)
	return m
}

// answer reads the next response, skipping notifications (list_changed
// after a restart may come first).
func (c *testClient) answer() *jsonrpc.Message {
	c.t.Helper()
	for {
		m := c.recv()
		if m.Kind != jsonrpc.KindNotification {
			return m
		}
	}
}

// next reads the next message that is not a list_changed notification.
func (c *testClient) next() *jsonrpc.Message {
	c.t.Helper()
	for {
		m := c.recv()
		if !strings.HasSuffix(m.Method, "/list_changed") {
			return m
		}
	}
}

func (c *testClient) recvFrame() ([]byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	return c.r.Read()
}

// errorOf decodes an error response.
func errorOf(t *testing.T, m *jsonrpc.Message) (code int, reason string) {
	t.Helper()
	require.Equal(t, jsonrpc.KindError, m.Kind, "want an error, got %s", m.Frame)
	var e struct {
		Code int `json:"code"`
		Data struct {
			Reason string `json:"reason"`
			Server string `json:"server"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(m.Error, &e))
	return e.Code, e.Data.Reason
}

// hold keeps a "held" call until releaseHeld, noting the most held at once.
func (f *fakeServer) hold(m *jsonrpc.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = append(f.held, m)
	f.maxHeld = max(f.maxHeld, len(f.held))
}

// releaseHeld answers the oldest held call; false when none is held.
func (f *fakeServer) releaseHeld() bool {
	f.mu.Lock()
	if len(f.held) == 0 {
		f.mu.Unlock()
		return false
	}
	m := f.held[0]
	f.held = f.held[1:]
	p := f.procs[len(f.procs)-1]
	f.mu.Unlock()
	p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"held":true}`)))
	return true
}

// heldNow counts the calls held, and returns the most held at once.
func (f *fakeServer) heldNow() (n, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held), f.maxHeld
}

// set changes the fake server's behaviour under its lock.
func (f *fakeServer) set(fn func(*fakeServer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}
