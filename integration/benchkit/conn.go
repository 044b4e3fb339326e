package benchkit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// conn is one session, one JSON-RPC message per send and recv. One
// goroutine may send while another receives. Close is idempotent.
type conn interface {
	send(line []byte) error // line ends with '\n'
	recv() ([]byte, error)  // without the '\n', valid until the next recv
	Close() error
}

// streamConn is newline-delimited JSON over a byte stream.
type streamConn struct {
	w     io.Writer
	r     *bufio.Reader
	buf   []byte // a line longer than r's buffer, kept for the next one
	once  sync.Once
	close func() error
	err   error
}

func newStream(r io.Reader, w io.Writer, close func() error) *streamConn {
	return &streamConn{w: w, r: bufio.NewReaderSize(r, 256<<10), close: close}
}

func (s *streamConn) send(line []byte) error { _, err := s.w.Write(line); return err }

func (s *streamConn) Close() error {
	s.once.Do(func() { s.err = s.close() })
	return s.err
}

// recv returns the next line, valid until the next call: the buffer of a
// long line is reused, so that a 10 MB answer costs one copy, not the
// reallocations of a growing slice.
func (s *streamConn) recv() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	s.buf = append(s.buf[:0], line...)
	for {
		line, err = s.r.ReadSlice('\n')
		s.buf = append(s.buf, line...)
		if err == nil {
			return s.buf[:len(s.buf)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

func dialUnix(path string) (conn, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return newStream(c, c, c.Close), nil
}

// proc is a child process whose stdin and stdout are pipes of our own
// (so that Wait never closes the end a reader is using), in a process
// group of its own.
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end
	stdout *os.File // our end
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// spawn starts argv with env added to ours. Its stderr goes to stderr (nil:
// discarded).
func spawn(argv, env []string, stderr io.Writer) (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second // a stray grandchild holding stderr cannot hang Wait
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p := &proc{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{})}
	go func() { // owned by stop, which waits for exited
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop ends the process as an MCP client should: stdin closed, then
// SIGTERM to its group after grace, then SIGKILL. It returns Wait's error,
// nil for an exit 0 that followed the closing of stdin.
func (p *proc) stop(grace time.Duration) error {
	p.stdin.Close()
	defer p.stdout.Close()
	if p.waitFor(grace) {
		return p.err
	}
	syscall.Kill(-p.pid(), syscall.SIGTERM)
	if !p.waitFor(5 * time.Second) {
		syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
	}
	return fmt.Errorf("%s did not exit %v after its stdin closed: %w", p.cmd.Path, grace, errors.Join(p.err, errors.New("stopped by signal")))
}

func (p *proc) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// procConn is a session on a child's stdio; Close stops the child.
func procConn(p *proc, grace time.Duration) conn {
	return newStream(p.stdout, p.stdin, func() error { return p.stop(grace) })
}

// wsConn is one session over a WebSocket, one message per text frame.
type wsConn struct {
	ws   *websocket.Conn
	buf  bytes.Buffer // the last message, reused as recv's is
	once sync.Once
	err  error
}

// dialWS connects offering the subprotocol mcp, as the TypeScript SDK's
// client does.
func dialWS(url string) (conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Subprotocols: []string{"mcp"}}
	ws, resp, err := d.Dial(url, nil)
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (HTTP %s)", err, resp.Status)
		}
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	return &wsConn{ws: ws}, nil
}

func (c *wsConn) send(line []byte) error {
	return c.ws.WriteMessage(websocket.TextMessage, bytes.TrimSuffix(line, []byte("\n")))
}

// recv returns the next message, valid until the next call.
func (c *wsConn) recv() ([]byte, error) {
	_, r, err := c.ws.NextReader()
	if err != nil {
		return nil, err
	}
	c.buf.Reset()
	if _, err := c.buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(c.buf.Bytes(), []byte("\n")), nil
}

func (c *wsConn) Close() error {
	c.once.Do(func() {
		c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		c.err = c.ws.Close()
	})
	return c.err
}

// client numbers its requests 1, 2, 3... Numeric ids: supergateway turns
// every other id into null on the way back.
type client struct {
	conn
	next   int
	tool   string // the echo tool's name; "": echo
	modern bool   // a 2026-07-28 session: no initialize, the envelope on every request
}

// envelope is the _meta of a 2026-07-28 client's requests.
const envelope = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

func (c *client) request(method, params string) []byte {
	c.next++
	if c.modern {
		if params == "{}" {
			params = "{" + envelope + "}"
		} else {
			params = params[:len(params)-1] + "," + envelope + "}" // after the tool's name, which Mcp-Name is read from
		}
	}
	return request(c.next, method, params)
}

func request(id int, method, params string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + method + `","params":` + params + "}\n")
}

// call sends one request and returns its answer.
func (c *client) call(method, params string) ([]byte, error) {
	if err := c.send(c.request(method, params)); err != nil {
		return nil, err
	}
	return recvAnswer(c)
}

const initParams = `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`

// initialize opens the session as a client does: initialize, then the
// initialized notification; a 2026-07-28 client asks server/discover.
func (c *client) initialize() error {
	if c.modern {
		line, err := c.call("server/discover", "{}")
		if err == nil && !bytes.Contains(line, []byte(`"2026-07-28"`)) {
			err = fmt.Errorf("unexpected answer %.200s", line)
		}
		if err != nil {
			return fmt.Errorf("server/discover: %w", err)
		}
		return nil
	}
	line, err := c.call("initialize", initParams)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if !bytes.Contains(line, []byte(`"protocolVersion"`)) {
		return fmt.Errorf("initialize: unexpected answer %.200s", line)
	}
	return c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
}

// listTools asks for tools/list.
func (c *client) listTools() error {
	line, err := c.call("tools/list", "{}")
	if err == nil && !bytes.Contains(line, []byte(`"echo"`)) {
		err = fmt.Errorf("tools/list: no echo tool in %.200s", line)
	}
	return err
}

func (c *client) echoCall() []byte {
	tool := c.tool
	if tool == "" {
		tool = "echo"
	}
	return c.request("tools/call", `{"name":"`+tool+`","arguments":{"message":"bench`+strconv.Itoa(c.next+1)+`"}}`)
}

// echo makes one echo call.
func (c *client) echo() error {
	if err := c.send(c.echoCall()); err != nil {
		return err
	}
	return checkEcho(recvAnswer(c))
}

func checkEcho(line []byte, err error) error {
	if err == nil && !bytes.Contains(line, []byte(`Echo: bench`)) {
		err = fmt.Errorf("unexpected echo answer %.200s", line)
	}
	return err
}

// recvAnswer returns the next answer, skipping notifications and failing
// on an error answer. Only the head of a line is inspected, so that a
// 10 MB answer is not parsed.
func recvAnswer(c conn) ([]byte, error) {
	for {
		line, err := c.recv()
		if err != nil {
			return nil, err
		}
		head := line[:min(len(line), 256)]
		if bytes.Contains(head, []byte(`"method"`)) && !bytes.Contains(head, []byte(`"result"`)) {
			continue // a notification or a request from the server
		}
		if bytes.Contains(head, []byte(`"error"`)) {
			return nil, fmt.Errorf("error answer: %.300s", line)
		}
		return line, nil
	}
}
