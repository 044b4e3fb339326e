package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// JSON-RPC error codes the server answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	codeNotFound       = -32002 // MCP: resource not found
)

// historySize is how many recent methods and requests stats remembers.
const historySize = 100

var (
	// errNoResponse tells serve to send nothing for a request: it was
	// cancelled, or the process is exiting.
	errNoResponse = errors.New("no response")
	// errCancelledByClient is the cancel cause set by notifications/cancelled.
	errCancelledByClient = errors.New("cancelled by notifications/cancelled")
	// errStdinClosed is the cancel cause set for in-flight requests at EOF.
	errStdinClosed = errors.New("stdin closed")
	// errRunEnded is the cancel cause set for whatever is left when run returns.
	errRunEnded = errors.New("server stopped")
)

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// run is the whole program: main calls it with the real stdio and exits with
// the code it returns; tests call it with pipes. It returns when stdin ends
// (0), when ctx is done (0), or when a crash is requested (the crash's code).
// A crash returns at once, without waiting for other requests; from then on
// nothing more is written to stdout.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	opts, err := parseOptions(args, os.Getenv(modeEnv), stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpmux-demo:", err)
		return 2
	}
	if opts.grandchildOnly {
		return sleepAsGrandchild(ctx, stderr)
	}
	if opts.ignoreSigterm {
		signal.Ignore(syscall.SIGTERM)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	s := newServer(ctx, opts, stdout, stderr)
	defer func() {
		s.dead.Store(true) // whatever is still running writes nothing more
		cancel(errRunEnded)
	}()
	if code, ok := s.startUp(stderr); !ok {
		return code
	}
	if opts.noRead {
		s.logf("--no-read: not reading stdin")
		idle(ctx, nil)
		return 0
	}
	return s.readUntilEnd(ctx, cancel, stdin)
}

// newServer is the state of a run under root, the parent of every
// request's context.
func newServer(root context.Context, opts options, stdout, stderr io.Writer) *server {
	return &server{
		opts:      opts,
		stdout:    stdout,
		stderr:    &lockedWriter{w: stderr},
		root:      root,
		inflight:  make(map[string]*request),
		exited:    make(chan struct{}),
		cancelled: []json.RawMessage{},
		aborted:   []json.RawMessage{},
	}
}

// startUp does what the options ask for before the first read: the
// grandchild, the banner, the crash when a file exists (ok false, with its
// exit code); then it logs that the server is ready.
func (s *server) startUp(stderr io.Writer) (code int, ok bool) {
	if s.opts.ignoreSigterm {
		s.logf("ignoring SIGTERM")
	}
	if s.opts.grandchild {
		pid, err := spawnGrandchild(stderr, s.stderr)
		if err != nil {
			s.logf("spawn grandchild: %v", err)
		} else {
			s.grandchild = pid
			s.stderr.line(fmt.Sprintf("grandchild pid %d", pid))
		}
	}
	for i := 1; i <= s.opts.banner; i++ {
		s.writeLine(fmt.Appendf(nil, "mcpmux-demo banner line %d: this is not json", i), false)
	}
	if s.opts.crashIfExists != "" {
		if _, err := os.Stat(s.opts.crashIfExists); err == nil {
			s.logf("%s exists: exiting with code 3", s.opts.crashIfExists)
			return 3, false
		}
	}
	time.Sleep(s.opts.startDelay) // the slow start being simulated, not a synchronisation
	s.logf("ready, pid %d", os.Getpid())
	return 0, true
}

// readUntilEnd reads stdin until it ends, ctx is done or a crash is requested,
// and returns run's exit code. At the end of stdin it stops slow tools
// quietly and lets quick ones answer (with --ignore-eof it stays up).
func (s *server) readUntilEnd(ctx context.Context, cancel context.CancelCauseFunc, stdin io.Reader) int {
	readDone := make(chan error, 1)
	go func() { readDone <- s.readLoop(stdin) }()
	select {
	case err := <-readDone:
		if errors.Is(err, io.EOF) {
			s.logf("stdin closed")
		} else {
			s.logf("read stdin: %v", err)
		}
	case <-s.exited:
		return s.exitCode
	case <-ctx.Done():
		return 0
	}

	if s.opts.ignoreEOF {
		s.logf("--ignore-eof: staying up")
		idle(ctx, s.exited) // requests in flight may still crash the server
		select {
		case <-s.exited:
			return s.exitCode
		default:
			return 0
		}
	}

	// Stop slow tools quietly, let quick ones answer, then leave.
	cancel(errStdinClosed)
	handlersDone := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(handlersDone)
	}()
	select {
	case <-handlersDone:
		return 0
	case <-s.exited:
		return s.exitCode
	}
}

// server is the state of one run.
type server struct {
	opts       options
	stderr     *lockedWriter
	root       context.Context // parent of every request's context
	grandchild int             // pid of the --grandchild process, or 0
	handlers   sync.WaitGroup  // one per request being served

	// outMu serialises stdout: every message is one Write of a whole line.
	outMu    sync.Mutex
	stdout   io.Writer
	outErr   error        // first write error; later writes are skipped
	answered atomic.Int64 // responses to requests that had an id; changed under outMu

	// slowNow and slowMost count the slow calls running, now and at most.
	slowNow, slowMost atomic.Int32

	// stopReading is set by the stop_reading tool: the read loop blocks.
	stopReading atomic.Bool

	// dead is set when the process is about to exit; writes are dropped.
	dead     atomic.Bool
	exitOnce sync.Once
	exitCode int
	exited   chan struct{} // closed by exit

	mu             sync.Mutex
	inflight       map[string]*request             // by compacted id
	initializes    int                             // initialize requests received
	initialized    int                             // notifications/initialized received
	requests       int                             // requests received (messages with method and id)
	duplicates     int                             // requests whose id was already in flight
	cancelled      []json.RawMessage               // requestIds of every notifications/cancelled
	aborted        []json.RawMessage               // ids of requests that a cancellation stopped
	methods        []string                        // last historySize methods, oldest first
	progressTokens []json.RawMessage               // the token (or nil) of each of the last historySize requests
	asks           map[string]chan json.RawMessage // the server's own requests (ask) waiting for their answer, by id
	nextAsk        int
}

// request is one request being served.
type request struct {
	id            json.RawMessage // exactly as received
	key           string          // id after json.Compact, for matching cancellations
	method        string
	params        json.RawMessage
	progressToken json.RawMessage // params._meta.progressToken, exactly as received; nil if absent
	first         bool            // for initialize: the first one of this run
	ctx           context.Context
	cancel        context.CancelCauseFunc
}

// exit makes run return code as soon as possible, and silences stdout.
func (s *server) exit(code int) {
	s.dead.Store(true)
	s.exitOnce.Do(func() {
		s.exitCode = code
		close(s.exited)
	})
}

// logf writes one log line to stderr.
func (s *server) logf(format string, args ...any) {
	s.stderr.line("mcpmux-demo: " + fmt.Sprintf(format, args...))
}

// writeLine writes line and a newline to stdout in a single Write. answer
// marks a response to a request with an id; those count towards
// --crash-after, which takes effect before the lock is released so that no
// further message can slip out.
func (s *server) writeLine(line []byte, answer bool) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.dead.Load() || s.outErr != nil {
		return
	}
	var n int64
	if answer {
		// Counted before the Write, so a client that has read the line
		// sees it counted in stats.
		n = s.answered.Add(1)
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	if _, err := s.stdout.Write(buf); err != nil {
		s.outErr = err
		s.logf("write stdout: %v", err)
		return
	}
	if answer && s.opts.crashAfter > 0 && n >= int64(s.opts.crashAfter) {
		s.logf("--crash-after %d: exiting with code 3", s.opts.crashAfter)
		s.exit(3)
	}
}

// reply sends a result for id.
func (s *server) reply(id json.RawMessage, result any) {
	body, err := marshal(result)
	if err != nil {
		s.replyError(id, &rpcError{Code: codeInternalError, Message: "encode result: " + err.Error()})
		return
	}
	s.writeLine(envelope(id, "result", body), !isNull(id))
}

// replyError sends an error for id; a nil id is sent as null.
func (s *server) replyError(id json.RawMessage, e *rpcError) {
	body, _ := marshal(e) // a code and a string always encode
	s.writeLine(envelope(id, "error", body), !isNull(id))
}

// notify sends a notification; params may be nil.
func (s *server) notify(method string, params any) error {
	msg := struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params}
	line, err := marshal(msg)
	if err != nil {
		return err
	}
	s.writeLine(line, false)
	return nil
}

// envelope assembles a response line by hand, so that id is copied exactly.
func envelope(id json.RawMessage, member string, body []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	line := make([]byte, 0, len(id)+len(body)+40)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"`...)
	line = append(line, member...)
	line = append(line, `":`...)
	line = append(line, body...)
	return append(line, '}')
}

// marshal encodes v compactly without HTML escaping, so strings and raw
// values keep their bytes.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// compactKey is the key under which an id is tracked: its bytes after
// json.Compact, so `"a"` and ` "a" ` match but `1` and `1.0` do not.
func compactKey(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// isID reports whether raw, a valid JSON value, is a string or a number:
// the id types MCP allows.
func isID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	c := raw[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// readLoop reads stdin line by line until EOF or an error, which it returns.
func (s *server) readLoop(stdin io.Reader) error {
	br := bufio.NewReaderSize(stdin, 64<<10)
	for {
		if s.stopReading.Load() {
			s.logf("stop_reading: no longer reading stdin")
			idle(s.root, nil)
			return s.root.Err()
		}
		line, tooLong, err := readLine(br, s.opts.maxLine)
		if err != nil {
			return err
		}
		if s.dead.Load() {
			continue // exiting: swallow input until run has returned
		}
		if tooLong {
			s.logf("dropped a line longer than %d bytes", s.opts.maxLine)
			s.replyError(nil, &rpcError{Code: codeParseError, Message: fmt.Sprintf("line longer than %d bytes", s.opts.maxLine)})
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		s.dispatch(line)
	}
}

// readLine returns the next line without its "\n" or "\r\n". A line longer
// than limit is consumed through its newline and reported by tooLong, without
// being kept. An unterminated last line is returned before EOF.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) > limit+2 { // room for "\r\n"
			tooLong, line = true, nil
		}
		if !tooLong {
			line = append(line, chunk...) // ReadSlice reuses its buffer
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && (len(line) == 0 && !tooLong || !errors.Is(err, io.EOF)):
			return nil, false, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > limit {
			return nil, true, nil
		}
		return line, tooLong, nil
	}
}

// dispatch classifies one line. Notifications are handled here, in order;
// each request gets its own goroutine. Everything that stats reports about
// the message is recorded before dispatch returns, so stats always reflects
// every line read before its own.
func (s *server) dispatch(line []byte) {
	if !json.Valid(line) {
		s.replyError(nil, &rpcError{Code: codeParseError, Message: "parse error: line is not valid JSON"})
		return
	}
	var msg map[string]json.RawMessage // exact member names, unlike struct decoding
	if err := json.Unmarshal(line, &msg); err != nil {
		s.replyError(nil, &rpcError{Code: codeInvalidRequest, Message: "invalid request: expected a JSON object (batches are not supported)"})
		return
	}
	id, hasID := msg["id"]
	rawMethod, hasMethod := msg["method"]
	_, hasResult := msg["result"]
	_, hasError := msg["error"]
	if !hasMethod && (hasResult || hasError) {
		// Never answer a response, or two peers could trade errors forever.
		if !s.answeredAsk(id, line) {
			s.logf("ignoring a response (id %s): no request of this server's has that id", id)
		}
		return
	}
	if hasID && !isID(id) {
		s.replyError(nil, &rpcError{Code: codeInvalidRequest, Message: "invalid request: id must be a string or a number"})
		return
	}
	if !hasMethod {
		s.replyError(id, &rpcError{Code: codeInvalidRequest, Message: "invalid request: no method"})
		return
	}
	var method string
	if err := json.Unmarshal(rawMethod, &method); err != nil {
		s.replyError(id, &rpcError{Code: codeInvalidRequest, Message: "invalid request: method must be a string"})
		return
	}
	if string(msg["jsonrpc"]) != `"2.0"` {
		if hasID {
			s.replyError(id, &rpcError{Code: codeInvalidRequest, Message: `invalid request: jsonrpc must be "2.0"`})
		} else {
			s.logf("dropping notification %q without jsonrpc \"2.0\"", method)
		}
		return
	}
	if !hasID {
		s.handleNotification(method, msg["params"])
		return
	}
	s.startRequest(id, method, msg["params"])
}

// startRequest records a request and serves it on its own goroutine.
func (s *server) startRequest(id json.RawMessage, method string, params json.RawMessage) {
	req := &request{id: id, key: compactKey(id), method: method, params: params}
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) == nil && !isNull(p.Meta.ProgressToken) {
		req.progressToken = p.Meta.ProgressToken
	}

	s.mu.Lock()
	s.requests++
	s.methods = appendRecent(s.methods, method)
	s.progressTokens = appendRecent(s.progressTokens, req.progressToken)
	if method == "initialize" {
		s.initializes++
		req.first = s.initializes == 1
	}
	_, duplicate := s.inflight[req.key]
	if duplicate {
		s.duplicates++
	} else {
		req.ctx, req.cancel = context.WithCancelCause(s.root)
		s.inflight[req.key] = req
	}
	s.mu.Unlock()

	if s.opts.stderrNoise {
		s.logf("request %s id %s", method, id)
	}
	if duplicate {
		s.logf("request id %s is already in flight", id)
		s.replyError(id, &rpcError{Code: codeInvalidRequest, Message: "invalid request: id " + string(id) + " is already in flight"})
		return
	}
	s.handlers.Add(1)
	go s.serve(req)
}

// serve answers one request, unless it was cancelled or the process is
// exiting.
func (s *server) serve(req *request) {
	defer s.handlers.Done()
	result, err := s.handleRequest(req)

	s.mu.Lock()
	delete(s.inflight, req.key)
	s.mu.Unlock()
	byClient := errors.Is(context.Cause(req.ctx), errCancelledByClient)
	req.cancel(nil)

	var rerr *rpcError
	switch {
	case errors.Is(err, errNoResponse):
	case byClient:
		s.logf("request %s was cancelled; not answering", req.id)
	case errors.As(err, &rerr):
		s.replyError(req.id, rerr)
	case err != nil:
		s.replyError(req.id, &rpcError{Code: codeInternalError, Message: err.Error()})
	default:
		s.reply(req.id, result)
	}
}

// handleNotification acts on a notification. Notifications are never
// answered, whatever their method.
func (s *server) handleNotification(method string, params json.RawMessage) {
	s.mu.Lock()
	s.methods = appendRecent(s.methods, method)
	s.mu.Unlock()

	switch method {
	case "notifications/initialized":
		s.mu.Lock()
		s.initialized++
		s.mu.Unlock()
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		if err := json.Unmarshal(params, &p); err != nil || !isID(p.RequestID) {
			s.logf("ignoring a malformed notifications/cancelled: %s", params)
			return
		}
		s.mu.Lock()
		s.cancelled = append(s.cancelled, p.RequestID)
		req := s.inflight[compactKey(p.RequestID)]
		s.mu.Unlock()
		if req == nil {
			s.logf("cancellation of %s, which is not in flight", p.RequestID)
			return
		}
		s.logf("cancelling request %s (%s)", p.RequestID, p.Reason)
		req.cancel(errCancelledByClient)
	default:
		s.logf("ignoring notification %s", method)
	}
}

// stopped is what a tool returns when its context ends early. A client's
// cancellation is recorded for stats; either way the request gets no answer.
func (s *server) stopped(req *request) error {
	if errors.Is(context.Cause(req.ctx), errCancelledByClient) {
		s.mu.Lock()
		s.aborted = append(s.aborted, req.id)
		s.mu.Unlock()
	}
	return errNoResponse
}

// appendRecent appends v and keeps only the last historySize entries.
func appendRecent[T any](list []T, v T) []T {
	list = append(list, v)
	if len(list) > historySize {
		list = append(list[:0:0], list[len(list)-historySize:]...)
	}
	return list
}

// lockedWriter makes whole-line writes to a shared writer atomic.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// line writes text, adding a newline unless it already ends with one.
func (l *lockedWriter) line(text string) {
	if len(text) == 0 || text[len(text)-1] != '\n' {
		text += "\n"
	}
	_, _ = l.Write([]byte(text)) // nowhere left to report a failing stderr
}

// spawnGrandchild starts this executable again with --grandchild-only. The
// child keeps no stdin or stdout, only stderr: the real file when the server
// has one, else a copy through w. It is reaped if it ever exits.
func spawnGrandchild(stderr io.Writer, w io.Writer) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, "--grandchild-only")
	if f, ok := stderr.(*os.File); ok {
		cmd.Stderr = f
	} else {
		cmd.Stderr = w
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }() // the grandchild is meant to outlive us
	return cmd.Process.Pid, nil
}

// sleepAsGrandchild is the whole life of a --grandchild-only process.
func sleepAsGrandchild(ctx context.Context, stderr io.Writer) int {
	signal.Ignore(syscall.SIGTERM)
	fmt.Fprintf(stderr, "mcpmux-demo: grandchild %d ignoring SIGTERM and sleeping\n", os.Getpid())
	idle(ctx, nil)
	return 0
}

// idle blocks until ctx is done or done is closed, which in the real program
// may be never. A plain channel receive would not do: with nothing else left
// to run, the Go runtime would call that a deadlock and abort the process,
// but a pending timer keeps it content.
func idle(ctx context.Context, done <-chan struct{}) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-tick.C:
		}
	}
}
