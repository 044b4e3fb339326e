package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// httpConn is one session over Streamable HTTP (the 2025 binding), as an
// SDK client holds it: each message is a POST with keep-alive connections,
// the initialize answer's Mcp-Session-Id (if any) goes on every later
// request, and a request's answer comes back as JSON or as an SSE stream.
// A POST runs in a goroutine of its own, so that pipelined calls are
// pipelined (the harness bounds how many are in flight); its messages go to
// recv in the order they arrive.
type httpConn struct {
	url    string
	token  string // "": no Authorization header
	modern bool   // the 2026-07-28 binding: no session, the revision and method in headers
	client *http.Client

	mu      sync.Mutex
	session string // Mcp-Session-Id, once initialize answered it
	version string // MCP-Protocol-Version, likewise

	msgs   chan httpMsg  // the messages of every POST's answer
	quit   chan struct{} // closed by Close: the POSTs stop delivering
	ctx    context.Context
	cancel context.CancelFunc // ends the POSTs in flight
	wg     sync.WaitGroup
	once   sync.Once
	held   *[]byte // the buffer of what recv returned last, given back at its next call

	freeMu sync.Mutex
	free   []*[]byte // event buffers for reuse, at most eventBufs
}

type httpMsg struct {
	line []byte
	buf  *[]byte // line's pooled buffer, if it has one
	err  error
}

// httpInFlight bounds the messages waiting for recv; a POST whose answer
// finds it full waits (the harness never has more than 64 in flight).
const httpInFlight = 1024

func dialHTTP(url, token string) (conn, error) { return newHTTPConn(url, token), nil }

// dialHTTPModern is a client of the 2026-07-28 binding: every POST stands
// alone, with no session id, and carries MCP-Protocol-Version, Mcp-Method
// and (for a tool call) Mcp-Name; the requests carry the envelope (the
// client's modern does that).
func dialHTTPModern(url, token string) (conn, error) {
	c := newHTTPConn(url, token)
	c.modern = true
	return c, nil
}

func newHTTPConn(url, token string) *httpConn {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		// Below the daemon's one minute, as clients' are, so that a POST
		// never goes out on a connection the server is closing as idle.
		IdleConnTimeout:    30 * time.Second,
		DisableCompression: true,
		// A body is read 64 KiB at a time, as node's streams read it (the
		// default, 4 KiB, makes a 10 MB answer 2,500 reads).
		ReadBufferSize: 64 << 10,
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &httpConn{url: url, token: token, client: &http.Client{Transport: tr},
		msgs: make(chan httpMsg, httpInFlight), quit: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// send POSTs line. A request's POST runs in a goroutine of its own; the
// initialize is posted and answered before send returns, so that the
// session id is there for what follows, and so is a notification (202 at
// once), as SDK clients do, so that a session holds one connection unless
// it pipelines.
func (c *httpConn) send(line []byte) error {
	body := bytes.Clone(bytes.TrimSuffix(line, []byte("\n")))
	head := body[:min(len(body), 128)]
	if bytes.Contains(head, []byte(`"method":"initialize"`)) {
		return c.post(body, true)
	}
	if !bytes.Contains(head, []byte(`"id":`)) {
		return c.post(body, false)
	}
	c.wg.Go(func() {
		if err := c.post(body, false); err != nil {
			c.deliver(httpMsg{err: err})
		}
	})
	return nil
}

// post sends one message and delivers its answer's messages.
func (c *httpConn) post(body []byte, initialize bool) error {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c.headers(req)
	if c.modern {
		modernHeaders(req, body)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("POST %s: %s: %s", c.url, resp.Status, msg)
	}
	if initialize {
		c.mu.Lock()
		c.session = resp.Header.Get("Mcp-Session-Id")
		c.version = "2025-06-18"
		c.mu.Unlock()
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return c.readEvents(resp.Body)
	}
	line, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	c.deliver(httpMsg{line: bytes.TrimSpace(line)})
	return nil
}

func (c *httpConn) headers(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
}

// modernHeaders sets the 2026-07-28 binding's headers of one request,
// read from the head of its body as the harness writes it.
func modernHeaders(req *http.Request, body []byte) {
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	if m := member(body, `"method":"`); m != "" {
		req.Header.Set("Mcp-Method", m)
	}
	if n := member(body, `"name":"`); n != "" && bytes.Contains(body, []byte(`"method":"tools/call"`)) {
		req.Header.Set("Mcp-Name", n)
	}
}

// member is the string after the first key in b, up to its closing quote.
func member(b []byte, key string) string {
	_, rest, ok := bytes.Cut(b, []byte(key))
	if !ok {
		return ""
	}
	v, _, _ := bytes.Cut(rest, []byte(`"`))
	return string(v)
}

// readEvents delivers the data of each SSE event until the stream ends.
// An event's data is gathered in a pooled buffer as it is read, piece by
// piece, which recv gives back after the next call: a 10 MB answer costs
// one copy, as on the socket (streamConn), not the reallocations of a
// growing line and then a second copy of its data.
func (c *httpConn) readEvents(body io.Reader) error {
	r := bufio.NewReaderSize(body, 64<<10)
	var (
		ev    *[]byte // the data of the event being read
		lines int     // its data lines so far
		start = true  // the next piece begins a line
		keep  bool    // the line being read is data
	)
	defer func() { c.putEventBuf(ev) }()
	for {
		piece, err := r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		end := err == nil
		if start {
			switch {
			case end && len(bytes.TrimRight(piece, "\r\n")) == 0: // the end of an event
				if lines > 0 {
					c.deliver(httpMsg{line: *ev, buf: ev})
					ev, lines = nil, 0
				}
				continue
			case bytes.HasPrefix(piece, []byte("data:")):
				piece = bytes.TrimPrefix(piece[len("data:"):], []byte(" "))
				if ev == nil {
					ev = c.getEventBuf()
				}
				if lines++; lines > 1 {
					*ev = append(*ev, '\n')
				}
				keep = true
			default:
				keep = false
			}
		}
		if keep {
			if end {
				piece = bytes.TrimRight(piece, "\r\n")
			}
			*ev = append(*ev, piece...)
		}
		start = end
	}
}

// eventBufs is how many event buffers a connection keeps for reuse. They
// are its own, not a sync.Pool's, which a collection empties: a 10 MB
// answer would then find no buffer and grow a fresh one, page by page.
const eventBufs = 4

// getEventBuf takes the largest buffer kept, since an event's size is not
// known until it has been read: a large answer then finds the buffer the
// last one grew, as the socket's reader keeps its one long-line buffer.
func (c *httpConn) getEventBuf() *[]byte {
	c.freeMu.Lock()
	defer c.freeMu.Unlock()
	if len(c.free) == 0 {
		return new([]byte)
	}
	big := 0
	for i, p := range c.free {
		if cap(*p) > cap(*c.free[big]) {
			big = i
		}
	}
	p := c.free[big]
	last := len(c.free) - 1
	c.free[big], c.free[last] = c.free[last], nil
	c.free = c.free[:last]
	*p = (*p)[:0]
	return p
}

// putEventBuf keeps p for reuse. When eventBufs are kept already, the
// smallest of them and p is the one let go: pipelined echoes, 64 at once,
// come back with more buffers than are kept, and keeping whichever came
// back first let go of the large one, which the next large answer then
// grew again from a few bytes.
func (c *httpConn) putEventBuf(p *[]byte) {
	if p == nil || cap(*p) > 64<<20 {
		return
	}
	c.freeMu.Lock()
	defer c.freeMu.Unlock()
	if len(c.free) < eventBufs {
		c.free = append(c.free, p)
		return
	}
	small := 0
	for i, q := range c.free {
		if cap(*q) < cap(*c.free[small]) {
			small = i
		}
	}
	if cap(*p) > cap(*c.free[small]) {
		c.free[small] = p
	}
}

func (c *httpConn) deliver(m httpMsg) {
	select {
	case c.msgs <- m:
	case <-c.quit:
	}
}

// recv returns the next message of any POST's answer.
func (c *httpConn) recv() ([]byte, error) {
	c.putEventBuf(c.held)
	c.held = nil
	select {
	case m := <-c.msgs:
		c.held = m.buf
		return m.line, m.err
	case <-c.quit:
		return nil, net.ErrClosed
	}
}

// Close ends the session (DELETE, as a client that says goodbye does),
// stops the POSTs in flight and waits for them.
func (c *httpConn) Close() error {
	c.once.Do(func() {
		close(c.quit)
		c.cancel()
		c.mu.Lock()
		session := c.session
		c.mu.Unlock()
		if session != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil); err == nil {
				c.headers(req)
				if resp, err := c.client.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}
		c.client.Transport.(*http.Transport).CloseIdleConnections()
	})
	c.wg.Wait()
	return nil
}
