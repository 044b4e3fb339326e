// Package benchkit measures, side by side and against the same backend (the
// demo server), the cost of the ways a client can reach an MCP server:
// directly over its stdio, through a plain byte relay on a Unix socket (the
// floor), through mcpmux's Unix socket, through `mcpmux connect` and over
// mcpmux's WebSocket. The program integration/bench prints its figures;
// integration/bench_harness_test.go runs it in short mode.
package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// Options says what to measure and with which binaries.
type Options struct {
	Short      bool   // a few iterations: only checks that every path works
	Mcpmux     string // prebuilt mcpmux; empty: built with go build
	Demoserver string // prebuilt demo server; empty: built with go build
	Progress   io.Writer
}

// Row is the figures of one path.
type Row struct {
	Path        string
	P50, P99    time.Duration // sequential echo round trip
	CallsPerSec float64       // pipelined echo, InFlight at once
	MBps1       float64       // a 1 MB huge result
	MBps10      float64       // a 10 MB huge result
}

// Report is the result of a run.
type Report struct {
	Rows                  []Row
	EchoCalls, Pipelined  int
	InFlight              int
	Huge1Reps, Huge10Reps int
}

// InFlight is how many pipelined calls are outstanding at once.
const InFlight = 64

const token = "bench-token"

type counts struct{ warm, echo, pipelined, huge1, huge10 int }

// Run builds what it needs and measures every path.
func Run(ctx context.Context, o Options) (*Report, error) {
	n := counts{warm: 200, echo: 2000, pipelined: 20000, huge1: 20, huge10: 5}
	if o.Short {
		n = counts{warm: 2, echo: 20, pipelined: 200, huge1: 1, huge10: 1}
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, err := os.MkdirTemp("", "mxb")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := build(ctx, dir, &o); err != nil {
		return nil, err
	}
	d, err := startDaemon(ctx, dir, o.Mcpmux, o.Demoserver)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	relay, err := startRelay(dir, o.Demoserver)
	if err != nil {
		return nil, err
	}
	defer relay.stop()

	paths := []struct {
		name string
		dial func() (conn, error)
	}{
		{"direct stdio", func() (conn, error) { return startCmd(exec.Command(o.Demoserver), io.Discard) }},
		{"byte relay (unix)", func() (conn, error) { return dialUnix(relay.path) }},
		{"mcpmux unix socket", func() (conn, error) { return dialUnix(d.socket) }},
		{"mcpmux connect", func() (conn, error) {
			return startCmd(exec.Command(o.Mcpmux, "connect", "--config", d.config, "--no-autostart", "demo"), os.Stderr)
		}},
		{"mcpmux websocket", func() (conn, error) { return dialWS(d.wsURL) }},
	}
	rep := &Report{EchoCalls: n.echo, Pipelined: n.pipelined, InFlight: InFlight, Huge1Reps: n.huge1, Huge10Reps: n.huge10}
	for _, p := range paths {
		fmt.Fprintf(progress, "measuring %s...\n", p.name)
		c, err := p.dial()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		row, err := measure(c, n)
		cerr := c.Close()
		if err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		row.Path = p.name
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// build fills in the binaries that o does not name.
func build(ctx context.Context, dir string, o *Options) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	var errs []error
	for _, b := range []struct {
		path *string
		pkg  string
	}{
		{&o.Mcpmux, "github.com/mcpmux/mcpmux/cmd/mcpmux"},
		{&o.Demoserver, "github.com/mcpmux/mcpmux/integration/demoserver"},
	} {
		if *b.path != "" {
			continue
		}
		out := filepath.Join(dir, filepath.Base(b.pkg))
		cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, b.pkg)
		if msg, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("go build %s: %w\n%s", b.pkg, err, msg))
			continue
		}
		*b.path = out
	}
	return errors.Join(errs...)
}

// measure runs the warm-up, the sequential echoes, the pipelined echoes and
// the huge results on one initialized session.
func measure(c conn, n counts) (Row, error) {
	var row Row
	if err := c.send(request("init", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)); err != nil {
		return row, err
	}
	if _, err := recvAnswer(c); err != nil {
		return row, fmt.Errorf("initialize: %w", err)
	}
	if err := c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		return row, err
	}
	echo := func(i int) error {
		if err := c.send(echoCall(i)); err != nil {
			return err
		}
		line, err := recvAnswer(c)
		if err == nil && !bytes.Contains(line, []byte(`"bench`)) {
			err = fmt.Errorf("unexpected echo answer %.200s", line)
		}
		return err
	}
	for i := range n.warm {
		if err := echo(i); err != nil {
			return row, fmt.Errorf("warm-up: %w", err)
		}
	}
	lat := make([]time.Duration, n.echo)
	for i := range n.echo {
		t0 := time.Now()
		if err := echo(i); err != nil {
			return row, fmt.Errorf("echo: %w", err)
		}
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	row.P50, row.P99 = lat[len(lat)/2], lat[len(lat)*99/100]

	cps, err := pipelined(c, n.pipelined)
	if err != nil {
		return row, fmt.Errorf("pipelined: %w", err)
	}
	row.CallsPerSec = cps
	if row.MBps1, err = huge(c, 1_000_000, n.huge1); err != nil {
		return row, fmt.Errorf("huge 1 MB: %w", err)
	}
	if row.MBps10, err = huge(c, 10_000_000, n.huge10); err != nil {
		return row, fmt.Errorf("huge 10 MB: %w", err)
	}
	return row, nil
}

// pipelined sends total echo calls keeping InFlight outstanding and returns
// calls per second.
func pipelined(c conn, total int) (float64, error) {
	slots := make(chan struct{}, InFlight)
	done := make(chan error, 1)
	t0 := time.Now()
	go func() {
		for range total {
			line, err := recvAnswer(c)
			if err == nil && !bytes.Contains(line, []byte(`"bench`)) {
				err = fmt.Errorf("unexpected answer %.200s", line)
			}
			if err != nil {
				done <- err
				return
			}
			<-slots
		}
		done <- nil
	}()
	for i := range total {
		select {
		case slots <- struct{}{}:
		case err := <-done:
			return 0, errors.Join(err, errors.New("answers ended early"))
		}
		if err := c.send(echoCall(i)); err != nil {
			return 0, err
		}
	}
	if err := <-done; err != nil {
		return 0, err
	}
	return float64(total) / time.Since(t0).Seconds(), nil
}

// huge asks reps times, one at a time, for a result of size bytes and
// returns the MB/s of the answers received.
func huge(c conn, size, reps int) (float64, error) {
	var bytesIn int
	t0 := time.Now()
	for i := range reps {
		if err := c.send(request(strconv.Itoa(i), "tools/call", fmt.Sprintf(`{"name":"huge","arguments":{"bytes":%d}}`, size))); err != nil {
			return 0, err
		}
		line, err := recvAnswer(c)
		if err != nil {
			return 0, err
		}
		if len(line) < size {
			return 0, fmt.Errorf("answer of %d bytes for a %d-byte result: %.200s", len(line), size, line)
		}
		bytesIn += len(line)
	}
	return float64(bytesIn) / 1e6 / time.Since(t0).Seconds(), nil
}

func request(id, method, params string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Quote(id) + `,"method":"` + method + `","params":` + params + "}\n")
}

func echoCall(i int) []byte {
	return request(strconv.Itoa(i), "tools/call", `{"name":"echo","arguments":{"text":"bench`+strconv.Itoa(i)+`"}}`)
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

// conn is one session, one JSON-RPC message per send and recv.
type conn interface {
	send(line []byte) error // line ends with '\n'
	recv() ([]byte, error)  // without the '\n'
	Close() error
}

// streamConn is newline-delimited JSON over a byte stream.
type streamConn struct {
	w     io.Writer
	r     *bufio.Reader
	close func() error
}

func newStream(r io.Reader, w io.Writer, close func() error) *streamConn {
	return &streamConn{w: w, r: bufio.NewReaderSize(r, 1<<20), close: close}
}

func (s *streamConn) send(line []byte) error { _, err := s.w.Write(line); return err }
func (s *streamConn) Close() error           { return s.close() }
func (s *streamConn) recv() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err == nil {
		return line[:len(line)-1], nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	buf := append([]byte(nil), line...)
	for {
		line, err = s.r.ReadSlice('\n')
		buf = append(buf, line...)
		if err == nil {
			return buf[:len(buf)-1], nil
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

// startCmd runs cmd with its stdio on pipes; Close closes its stdin and
// waits for it to exit.
func startCmd(cmd *exec.Cmd, stderr io.Writer) (conn, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return newStream(stdout, stdin, func() error {
		stdin.Close()
		return cmd.Wait()
	}), nil
}

// wsConn is one session over a WebSocket, one message per text frame.
type wsConn struct{ ws *websocket.Conn }

func dialWS(url string) (conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial(url+"?token="+token, nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	return &wsConn{ws: ws}, nil
}

func (c *wsConn) send(line []byte) error {
	return c.ws.WriteMessage(websocket.TextMessage, bytes.TrimSuffix(line, []byte("\n")))
}

func (c *wsConn) recv() ([]byte, error) {
	_, msg, err := c.ws.ReadMessage()
	return bytes.TrimSuffix(msg, []byte("\n")), err
}

func (c *wsConn) Close() error {
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	return c.ws.Close()
}

// relay is the floor: each accepted Unix connection gets its own demo
// server, and two io.Copy loops pass the bytes, nothing parsed.
type relay struct {
	path string
	ln   net.Listener
	wg   sync.WaitGroup
}

func startRelay(dir, demoserver string) (*relay, error) {
	r := &relay{path: filepath.Join(dir, "relay.sock")}
	ln, err := net.Listen("unix", r.path)
	if err != nil {
		return nil, err
	}
	r.ln = ln
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.wg.Go(func() { serveRelay(c, demoserver) })
		}
	})
	return r, nil
}

func serveRelay(c net.Conn, demoserver string) {
	defer c.Close()
	cmd := exec.Command(demoserver)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil { // its stderr is discarded
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(c, stdout)
		c.(*net.UnixConn).CloseWrite()
	})
	io.Copy(stdin, c)
	stdin.Close() // EOF: the demo server exits
	wg.Wait()
	cmd.Wait()
}

func (r *relay) stop() {
	r.ln.Close()
	r.wg.Wait()
}

// daemon is a running `mcpmux serve` with one server, demo.
type daemon struct {
	cmd    *exec.Cmd
	config string
	socket string
	wsURL  string
	log    *syncBuffer
	exited chan error
}

var webURL = regexp.MustCompile(`url=ws://([^/\s]+)/servers/NAME`)

func startDaemon(ctx context.Context, dir, mcpmux, demoserver string) (*daemon, error) {
	sockets := filepath.Join(dir, "s")
	d := &daemon{config: filepath.Join(dir, "mux.toml"), socket: filepath.Join(sockets, "demo.sock"), log: &syncBuffer{}, exited: make(chan error, 1)}
	text := fmt.Sprintf("[daemon]\nlog_level = \"info\"\n\n[listen]\nsocket_dir = %q\nhttp = \"127.0.0.1:0\"\nhttp_token = %q\n\n[servers.demo]\ncommand = %q\n",
		sockets, token, demoserver)
	if err := os.WriteFile(d.config, []byte(text), 0o600); err != nil {
		return nil, err
	}
	d.cmd = exec.Command(mcpmux, "serve", "--config", d.config)
	d.cmd.Stderr = d.log
	d.cmd.WaitDelay = 5 * time.Second
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.exited <- d.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := webURL.FindStringSubmatch(d.log.String()); m != nil && d.wsURL == "" {
			d.wsURL = "ws://" + m[1] + "/servers/demo"
		}
		if d.wsURL != "" {
			if c, err := net.Dial("unix", d.socket); err == nil {
				c.Close()
				return d, nil
			}
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			return nil, fmt.Errorf("mcpmux serve exited: %v\n%s", err, d.log.String())
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("mcpmux serve not ready in 20s:\n%s", d.log.String())
		}
	}
}

func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Table is the report as a Markdown table.
func (r *Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| path | echo p50 | echo p99 | pipelined calls/s (%d in flight) | 1 MB huge MB/s | 10 MB huge MB/s |\n", r.InFlight)
	b.WriteString("|---|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.0f | %.0f |\n", row.Path, us(row.P50), us(row.P99), row.CallsPerSec, row.MBps1, row.MBps10)
	}
	return b.String()
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3) }

// Row returns the row of path, or nil.
func (r *Report) Row(path string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Path == path {
			return &r.Rows[i]
		}
	}
	return nil
}

// Ratios is the Markdown list of mcpmux's figures over the relay's and the
// direct path's.
func (r *Report) Ratios() string {
	direct, relay := r.Row("direct stdio"), r.Row("byte relay (unix)")
	var b strings.Builder
	b.WriteString("| mcpmux path | p50 / relay | p50 / direct | calls/s / relay | calls/s / direct |\n|---|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		if !strings.HasPrefix(row.Path, "mcpmux") || direct == nil || relay == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.2f× | %.2f× | %.2f× | %.2f× |\n", row.Path,
			float64(row.P50)/float64(relay.P50), float64(row.P50)/float64(direct.P50),
			row.CallsPerSec/relay.CallsPerSec, row.CallsPerSec/direct.CallsPerSec)
	}
	return b.String()
}
