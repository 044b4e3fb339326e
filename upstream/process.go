package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
)

// drainGrace is how long, after the server has been reaped, the stdout and
// stderr readers get to reach EOF on their own before their pipes are closed
// under them. Only a descendant that left the process group can still hold
// those pipes by then; it must not keep Done from closing.
const drainGrace = 100 * time.Millisecond

// reaperStartTimeout bounds how long Start waits for the reaper to report
// the server's pid.
const reaperStartTimeout = 10 * time.Second

// reaperKillGrace is how long the reaper gets to act on a kill request
// before the whole group is SIGKILLed from here, reaper included.
const reaperKillGrace = time.Second

// Handler receives what the server writes. Its methods run on the reader
// goroutine, one call at a time and in stdout order, and must not block: a
// slow handler stops the server's output from being read.
type Handler interface {
	// HandleMessage receives each valid JSON-RPC message, of any kind. The
	// message and its frame belong to the handler.
	HandleMessage(m *jsonrpc.Message)
	// HandleTooLarge reports a stdout line longer than MaxMessageBytes. The
	// line was skipped without being held in memory; id is its top-level id
	// when the skipping scan found one, else nil.
	HandleTooLarge(id json.RawMessage, size int64)
	// HandleInvalidAnswer reports a stdout line that is not a valid
	// JSON-RPC message but has the shape of an answer whose id is
	// readable (Python's NaN, Latin-1 bytes in a string): err says what is
	// wrong with it. It reports whether the id was that of a request in
	// flight, now failed; a line it does not take counts as junk.
	HandleInvalidAnswer(id json.RawMessage, err error) bool
	// Flush sends on what the Handler held back while it handled a run of
	// messages that arrived together. The reader calls it before each read
	// that may wait for the server, and once it stops reading, so held-back
	// sends are delayed by no more than the handling of that run.
	Flush()
}

// Process is one run of one server. Its methods are safe for concurrent use.
type Process struct {
	cfg Config
	h   Handler
	log *slog.Logger
	cmd *exec.Cmd // the group's leader: the reaper, or the server itself
	pid int       // the server's
	// pgid is the leader's pid and the group's id; with a reaper it is
	// not pid.
	pgid int
	// reaper is true when the leader is a reaper; reports is what it
	// writes on its fd 3, reportsF the pipe under it.
	reaper   bool
	reports  *bufio.Reader
	reportsF *os.File
	ctr      *container        // the container the server runs in; nil for most
	ctrKill  *containerOutcome // how the reaper's kill of it went, once reported

	stdin  *os.File      // our write end, written through queue (writeLoop, or a Flush while it idles)
	queue  *outbox.Queue // frames for stdin, newlines counted
	stdout *os.File      // our read end; only readLoop reads it
	stderr *os.File      // our read end of the stderr pipe, when we read stderr at all
	tail   *ring         // last stderr lines, StderrLog only

	mu       sync.Mutex
	closed   bool        // Send refuses; closing is closed; stdin is closed
	reason   string      // why mcpmux ended the process; the first one set wins
	detail   string      // Exit.Detail
	stopping bool        // a Stop call drives the escalation
	dead     bool        // the leader has exited: no more signals to its group
	backstop *time.Timer // with a reaper: SIGKILL to the group if the reaper does not act on a kill request

	closing  chan struct{} // closed with closed
	ending   chan struct{} // closed when reason is set
	exited   chan struct{} // closed once the leader has exited and been reaped
	readDone chan struct{} // closed when readLoop stops reading stdout
	errDone  chan struct{} // closed when the stderr reader stops (at once if there is none)
	done     chan struct{} // closed last, by waitLoop
	exit     Exit          // written before done is closed
	served   *Exit         // the server's status as the reaper reported it; waitLoop only

	wg sync.WaitGroup // readLoop, writeLoop, the stderr reader
}

// Start spawns the server and returns once it runs. The executable is
// resolved afresh on every call and run directly, never through a shell, as
// the leader of a new process group; or, with Config.Reaper, the reaper
// leads the group and runs the server in it, and Start returns once the
// reaper has reported the server's pid.
func Start(cfg Config, h Handler) (p *Process, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("start %s: %w", cfg.Name, err)
		}
	}()
	if h == nil {
		return nil, errors.New("no handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	path, err := resolveCommand(cfg.Command, cfg.Environ)
	if err != nil {
		return nil, err
	}
	if err := checkDir(cfg.Dir); err != nil {
		return nil, err
	}
	sp := new(spawn)
	defer func() {
		sp.closeChildEnds()
		if err != nil {
			sp.closeOurEnds()
			if sp.container != nil {
				sp.container.cleanup()
			}
		}
	}()
	if err := sp.prepare(cfg, path); err != nil {
		return nil, err
	}
	err = sp.cmd.Start()
	// Our copies of the child's ends go now: EOF on the reports pipe must
	// come as soon as the reaper is gone.
	sp.closeChildEnds()
	if err != nil {
		return nil, err
	}
	pid := sp.cmd.Process.Pid
	var reports *bufio.Reader
	if sp.reports != nil {
		reports = bufio.NewReaderSize(sp.reports, 64)
		if pid, err = awaitServer(sp.cmd, path, sp.reports, reports); err != nil {
			return nil, err
		}
	}
	p = newProcess(cfg, h, sp, pid, reports)
	if p.reaper {
		p.log.Info("server started", "command", path, "reaper", p.pgid)
	} else {
		p.log.Info("server started", "command", path)
	}
	p.run(sp.copyTo)
	return p, nil
}

// checkDir checks the working directory before the start, because a
// failed chdir in the child reads as "fork/exec <command>: no such file or
// directory".
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("working directory: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("working directory %s is not a directory", dir)
	}
	return nil
}

// spawn is what Start prepares for the child: its command and its pipes.
// The child's ends are closed once it has its copies; ours only if the
// start fails, else by the Process.
type spawn struct {
	cmd       *exec.Cmd
	childEnds []*os.File
	ourEnds   []*os.File
	stdin     *os.File        // ours: the write end of the server's stdin
	rawIn     syscall.RawConn // stdin's, for writes that must not block
	stdout    *os.File        // ours: the read end of its stdout
	stderr    *os.File        // ours: the read end of its stderr, when we read it
	reports   *os.File        // ours: the read end of the reaper's fd 3, with a reaper
	copyTo    io.Writer       // StderrInherit to a writer that is not a file
	container *container      // the container the command starts, if it does
}

// pipe returns a pipe whose read (toChild false) or write (toChild true)
// end is ours. Our own pipes rather than StdoutPipe: Wait would close the
// read end under the reader, and we read to EOF after the reap.
func (sp *spawn) pipe(toChild bool) (ours, theirs *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if toChild {
		ours, theirs = w, r
	} else {
		ours, theirs = r, w
	}
	sp.ourEnds, sp.childEnds = append(sp.ourEnds, ours), append(sp.childEnds, theirs)
	return ours, theirs, nil
}

func (sp *spawn) closeChildEnds() {
	for _, f := range sp.childEnds {
		f.Close()
	}
	sp.childEnds = nil
}

func (sp *spawn) closeOurEnds() {
	for _, f := range sp.ourEnds {
		f.Close()
	}
	sp.ourEnds = nil
}

// prepare makes the pipes and the command that runs the server at path,
// or the reaper that runs it.
func (sp *spawn) prepare(cfg Config, path string) error {
	stdinW, stdinR, err := sp.pipe(true)
	if err != nil {
		return err
	}
	if sp.rawIn, err = stdinW.SyscallConn(); err != nil {
		return fmt.Errorf("stdin pipe: %w", err)
	}
	stdoutR, stdoutW, err := sp.pipe(false)
	if err != nil {
		return err
	}
	growPipe(stdoutR)
	sp.stdin, sp.stdout = stdinW, stdoutR
	env := childEnv(cfg.Environ, cfg.InheritEnv, cfg.Env)
	args, ctr, err := prepareContainer(cfg, path, env)
	if err != nil {
		return err
	}
	sp.container = ctr
	sp.cmd = &exec.Cmd{
		Path:        path,
		Args:        append([]string{cfg.Command}, args...),
		Env:         env,
		Dir:         cfg.Dir,
		Stdin:       stdinR,
		Stdout:      stdoutW,
		SysProcAttr: sysProcAttr(),
	}
	if len(cfg.Reaper) > 0 {
		if err := sp.underReaper(cfg.Reaper, path); err != nil {
			return err
		}
	}
	return sp.routeStderr(cfg)
}

// underReaper makes the command run the reaper, which gets what the server
// would have (the same pipes, environment and working directory) and runs
// the server with them; see RunReaper for its arguments.
func (sp *spawn) underReaper(reaper []string, path string) error {
	reportsR, reportsW, err := sp.pipe(false)
	if err != nil {
		return err
	}
	sp.reports = reportsR
	sp.cmd.Path = reaper[0]
	sp.cmd.Args = slices.Concat(reaper, []string{strconv.Itoa(os.Getpid())}, sp.container.reaperArgs(), []string{"--", path}, sp.cmd.Args)
	sp.cmd.ExtraFiles = []*os.File{reportsW}
	sp.cmd.SysProcAttr = reaperSysProcAttr()
	return nil
}

// routeStderr connects the child's stderr as cfg.Stderr says.
func (sp *spawn) routeStderr(cfg Config) error {
	var err error
	switch cfg.Stderr {
	case StderrLog:
		sp.stderr, sp.cmd.Stderr, err = sp.pipe(false)
	case StderrInherit:
		if f, ok := cfg.StderrInherit.(*os.File); ok {
			sp.cmd.Stderr = f // the daemon's own stderr: handed over, no copying
			return nil
		}
		sp.stderr, sp.cmd.Stderr, err = sp.pipe(false)
		sp.copyTo = cfg.StderrInherit
	case StderrDiscard:
		// nil: os/exec connects the null device.
	case StderrFile:
		f, ferr := os.OpenFile(cfg.StderrPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if ferr != nil {
			return ferr
		}
		sp.cmd.Stderr = f
		sp.childEnds = append(sp.childEnds, f)
	}
	return err
}

// newProcess is the Process of a started child.
func newProcess(cfg Config, h Handler, sp *spawn, pid int, reports *bufio.Reader) *Process {
	p := &Process{
		cfg:      cfg,
		h:        h,
		cmd:      sp.cmd,
		pid:      pid,
		pgid:     sp.cmd.Process.Pid,
		reaper:   sp.reports != nil,
		ctr:      sp.container,
		reports:  reports,
		reportsF: sp.reports,
		stdin:    sp.stdin,
		stdout:   sp.stdout,
		stderr:   sp.stderr,
		closing:  make(chan struct{}),
		ending:   make(chan struct{}),
		exited:   make(chan struct{}),
		readDone: make(chan struct{}),
		errDone:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	p.queue = outbox.New(&stdinWriter{f: sp.stdin, raw: sp.rawIn, stall: cfg.WriteStallTimeout}, outbox.Config{
		HighWater: cfg.WriteQueueBytes,
		Max:       2 * cfg.WriteQueueBytes,
		DirectMax: pipeBuf,
		Separator: 1, // the newline
	})
	if cfg.Stderr == StderrLog {
		p.tail = newRing(cfg.StderrTailLines)
	}
	p.log = cfg.Logger.With("server", cfg.Name, "pid", p.pid)
	return p
}

// run starts the Process's goroutines.
func (p *Process) run(copyTo io.Writer) {
	p.wg.Go(p.readLoop)
	p.wg.Go(p.writeLoop)
	if p.stderr != nil {
		p.wg.Go(func() { p.stderrLoop(copyTo) })
	} else {
		close(p.errDone)
	}
	// waitLoop owns the goroutines above: it waits for them, and closing
	// done is the last thing it does.
	go p.waitLoop()
}

// Pid is the server's process id. Without a reaper it is also the process
// group's id; with one, the reaper's pid is.
func (p *Process) Pid() int { return p.pid }

// awaitServer reads the reaper's first report: the server's pid, or why it
// could not start it. On any failure the reaper's group is killed and
// reaped.
func awaitServer(cmd *exec.Cmd, path string, f *os.File, reports *bufio.Reader) (int, error) {
	_ = f.SetReadDeadline(time.Now().Add(reaperStartTimeout))
	kind, n, err := readReport(reports)
	_ = f.SetReadDeadline(time.Time{})
	if err == nil && kind == reportPid && n > 0 {
		return n, nil
	}
	// Safe: the reaper, not yet reaped, holds the group id.
	signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	werr := cmd.Wait()
	switch {
	case err == nil && kind == reportError:
		// What a direct start says: "fork/exec PATH: permission denied".
		return 0, &os.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(n)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, fmt.Errorf("reaper %s did not start the server within %v", cmd.Path, reaperStartTimeout)
	case err == nil:
		return 0, fmt.Errorf("reaper %s: unexpected report %q", cmd.Path, kind)
	}
	return 0, fmt.Errorf("reaper %s ended before it started the server (%v)", cmd.Path, werr)
}

// readReport reads one report line of the reaper: a kind and a number.
func readReport(r *bufio.Reader) (kind string, n int, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", 0, err // a partial line, too: the reaper died writing it
	}
	kind, num, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if n, err = strconv.Atoi(num); err != nil {
		return "", 0, fmt.Errorf("reaper report %q: %w", line, err)
	}
	return kind, n, nil
}

// Send queues one frame for the server's stdin; the writer adds the newline,
// so frame must not end with one (nor contain one). It never blocks. The
// Process keeps frame until it is written: the caller must not change it.
// Send returns ErrClosed once the process is on its way out, and
// ErrQueueFull if the frame would take the queued bytes past twice
// WriteQueueBytes.
func (p *Process) Send(frame []byte) error { return p.send(frame, true) }

// SendLater is Send without waking the writer: the frame waits for the next
// Send or Flush. A caller that reads a run of frames queues all but the
// last with it and then flushes, so the run goes out in one write.
func (p *Process) SendLater(frame []byte) error { return p.send(frame, false) }

func (p *Process) send(frame []byte, wake bool) error {
	f := outbox.Frame{Data: frame}
	var err error
	switch {
	case len(frame)+1 > 2*p.cfg.WriteQueueBytes:
		// Past the bound even alone (the queue takes any one frame when
		// it is empty).
		err = outbox.ErrFull
		if isClosed(p.closing) {
			err = outbox.ErrClosed
		}
	case wake:
		err = p.queue.Send(f)
	default:
		err = p.queue.SendLater(f)
	}
	switch {
	case errors.Is(err, outbox.ErrClosed):
		return ErrClosed
	case errors.Is(err, outbox.ErrFull):
		return ErrQueueFull
	}
	return err
}

// SendLaterWait is SendLater for a session's request, which may wait
// rather than be refused: while the frame would take the queue past twice
// WriteQueueBytes it waits for queued bytes to leave, then tries again, so
// any number of sessions sending at once are slowed, never refused, and
// never take the queue past its bound. It returns ErrClosed once the
// process is on its way out, ErrStopped when stop is closed first, and
// ErrQueueFull only for a frame over the bound even alone.
func (p *Process) SendLaterWait(stop <-chan struct{}, frame []byte) error {
	if len(frame)+1 > 2*p.cfg.WriteQueueBytes {
		return p.send(frame, false)
	}
	for {
		freed, err := p.queue.SendLaterOr(outbox.Frame{Data: frame})
		switch {
		case errors.Is(err, outbox.ErrClosed):
			return ErrClosed
		case !errors.Is(err, outbox.ErrFull):
			return err
		}
		select {
		case <-freed:
		case <-p.closing:
			return ErrClosed
		case <-stop:
			return ErrStopped
		}
	}
}

// Flush writes what SendLater queued. When the writer is idle and the
// queued frames fit in one atomic pipe write, Flush writes them itself,
// without blocking: a request then reaches the server with no goroutine
// handoff. Otherwise, or when the pipe is full, the writer goroutine
// does; it owns stall detection. Flush never blocks.
func (p *Process) Flush() { p.queue.Flush() }

// WaitWritable is the flow control of the sessions: each calls it before it
// reads its next frame. It returns nil at once while the queued bytes are at
// most WriteQueueBytes, and otherwise blocks until they are, ctx is done
// (returning its cause), or the process is on its way out (ErrClosed).
func (p *Process) WaitWritable(ctx context.Context) error {
	room := p.queue.Room()
	switch {
	case isClosed(p.closing):
		return ErrClosed
	case isClosed(room):
		return nil
	}
	select {
	case <-room:
	case <-p.closing:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	if isClosed(p.closing) { // the room of a closed queue is always open
		return ErrClosed
	}
	return nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Queued reports the bytes waiting to be written to stdin, newlines
// included; 0 once the process is on its way out.
func (p *Process) Queued() int { return p.queue.Bytes() }

// Closed reports whether the process takes no more input: it is being
// stopped, or its server has exited and it is winding down (reading what is
// left in its pipes, killing its container) before Done.
func (p *Process) Closed() bool { return isClosed(p.closing) }

// Done is closed once the server has been reaped, what was left of its
// process group has been killed, and every goroutine of this Process has
// returned (so no Handler call follows).
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit says how the process ended. It is valid once Done is closed; before
// that it is the zero Exit.
func (p *Process) Exit() Exit {
	select {
	case <-p.done:
		return p.exit
	default:
		return Exit{}
	}
}

// StderrTail returns the last stderr lines, oldest first, in StderrLog mode;
// nil in the other modes.
func (p *Process) StderrTail() []string {
	if p.tail == nil {
		return nil
	}
	return p.tail.lines()
}

// Stop ends the process the way the MCP spec orders it: close stdin, give it
// StdinGrace to exit, SIGTERM to the process group, give it TermGrace,
// SIGKILL to the group (with a reaper: through the reaper, see signal).
// Once the leader has gone, whatever is left of the group is killed too,
// and Stop returns after Done. Exit.Reason is then
// ReasonStopped, unless the process was already ending for another reason.
//
// Stop is idempotent and safe to call concurrently or after the process
// exited by itself; one caller drives the escalation and all of them wait.
// ctx cancels only the waiting: when it is done first, Stop skips straight
// to SIGKILL, still waits for Done, and returns ctx's cause wrapped.
func (p *Process) Stop(ctx context.Context) error {
	p.end(ReasonStopped)
	first := p.markStopping()
	p.shut() // closes stdin

	if first && !p.await(ctx, p.cfg.StdinGrace) && ctx.Err() == nil {
		p.signal(syscall.SIGTERM)
		if !p.await(ctx, p.cfg.TermGrace) && ctx.Err() == nil {
			p.signal(syscall.SIGKILL)
		}
	}
	var err error
	select {
	case <-p.exited: // checked first: a ctx that ends now cut nothing short
	default:
		select {
		case <-p.exited:
		case <-ctx.Done():
			p.signal(syscall.SIGKILL)
			err = fmt.Errorf("stop %s: %w", p.cfg.Name, context.Cause(ctx))
		}
	}
	<-p.done // bounded: the leader is gone or SIGKILLed, and the pipes close after drainGrace
	return err
}

// markStopping records that Stop was called; true for the first call, which
// drives the escalation.
func (p *Process) markStopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := !p.stopping
	p.stopping = true
	return first
}

// Kill sends SIGKILL to the process group at once (with a reaper: through
// the reaper, see signal); Done follows. reason
// becomes Exit.Reason ("" reads as ReasonKilled) unless the process was
// already ending for another reason.
func (p *Process) Kill(reason string) {
	if reason == "" {
		reason = ReasonKilled
	}
	p.end(reason)
	p.shut()
	p.signal(syscall.SIGKILL)
}

// await waits up to d for the leader to exit, or for ctx; it reports
// whether the leader exited.
func (p *Process) await(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// setDetail says in words why mcpmux is about to end the process.
func (p *Process) setDetail(d string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason == "" {
		p.detail = d
	}
}

// end records why mcpmux is ending the process. The first reason wins, and
// none is recorded once the leader has exited on its own.
func (p *Process) end(reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason != "" || p.dead {
		return
	}
	p.reason = reason
	close(p.ending)
}

// shut stops taking input: Send and WaitWritable return ErrClosed from now
// on, the queue is dropped, and stdin is closed (which is also how a server
// is first asked to exit).
func (p *Process) shut() {
	if !p.markClosed() {
		return
	}
	p.queue.Close()
	p.stdin.Close() // a Write blocked in writeLoop returns at once
}

// markClosed closes closing, once; it reports whether this call did.
func (p *Process) markClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.closed = true
	close(p.closing)
	return true
}

// signal sends sig to the process group, unless the leader is gone: once it
// has been reaped its pid, and so the group id, may belong to someone else.
//
// With a reaper, SIGKILL is a request to the reaper instead: it SIGKILLs
// the server, reports how it ended, kills the server's descendants (on
// Linux even those that left the group, see RunReaper) and then the group.
// A SIGKILL to the group would kill the reaper before it could do that. If
// the reaper has not exited within reaperKillGrace, the group is SIGKILLed
// from here after all.
func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.dead:
	case sig == syscall.SIGKILL && p.reaper:
		if p.backstop != nil {
			return // asked already
		}
		_ = syscall.Kill(p.pgid, reaperKillSignal) // the reaper is ours, not yet reaped
		grace := reaperKillGrace
		if p.ctr != nil {
			grace += containerKillTimeout // the reaper kills the container first
		}
		p.backstop = time.AfterFunc(grace, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if !p.dead {
				p.log.Warn("reaper did not act on a kill request; killing its group", "grace", grace)
				signalGroup(p.pgid, syscall.SIGKILL)
			}
		})
	default:
		signalGroup(p.pgid, sig)
	}
}

// killGroup marks the leader dead and kills whatever is left in its group:
// descendants that outlived it (an npx or uv wrapper's children, a server's
// helpers). No one signals the group after this. With a reaper this is
// only a backstop: the reaper kills its group before it exits.
func (p *Process) killGroup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = true
	if p.backstop != nil {
		p.backstop.Stop()
	}
	signalGroup(p.pgid, syscall.SIGKILL)
}

// expectExit gives a server that can no longer talk (its stdout hit EOF, or
// its stdin refuses writes) StdinGrace to exit, then kills it for reason,
// unless it exits or is being ended for another reason first.
func (p *Process) expectExit(reason string) {
	t := time.NewTimer(max(p.cfg.StdinGrace, time.Millisecond))
	defer t.Stop()
	select {
	case <-p.exited:
	case <-p.ending:
	case <-t.C:
		p.log.Warn("server can no longer talk but has not exited; killing it", "reason", reason, "grace", p.cfg.StdinGrace)
		p.Kill(reason)
	}
}

// waitLoop reaps the server, kills what is left of its group, lets the
// readers drain, waits for every other goroutine and closes done.
func (p *Process) waitLoop() {
	var err error
	if waitExitNoReap(p.pgid) {
		// The leader is a zombie: its pid, and so its group id, cannot be
		// reused yet, so killing the group now cannot hit a stranger.
		p.killGroup()
		err = p.cmd.Wait()
	} else {
		// No way to wait without reaping here. Between the reap and the
		// kill a new process could in theory take the group id, once the
		// whole group is gone. A reaper kills its group before it exits, so
		// with one this kill only matters if the reaper itself was killed
		// alone (by the OOM killer, say), and then the group still has
		// members to hold its id.
		err = p.cmd.Wait()
		p.killGroup()
	}
	if p.reaper {
		p.readReports()
	}
	close(p.exited)
	p.shut()

	// Let the readers take what is already in the pipes; after the group
	// kill only a descendant that left the group can keep them open, and
	// it must not hold us up.
	t := time.NewTimer(drainGrace)
	expired := false
	for _, r := range []struct {
		done <-chan struct{}
		f    *os.File
	}{{p.readDone, p.stdout}, {p.errDone, p.stderr}} {
		if !expired {
			select {
			case <-r.done:
			case <-t.C:
				expired = true
			}
		}
		if r.f != nil {
			r.f.Close()
		}
	}
	t.Stop()
	p.wg.Wait()
	p.killContainer()

	p.exit = p.exitFrom(err)
	p.log.Info("server exited", "exit", p.exit.String())
	close(p.done)
}

// killContainer kills the container the server ran in, so that no
// container outlives its server: the engine's daemon owns it, and neither
// the group kill nor the reaper's sweep reaches it. A reaper has done it
// already and said how it went; its stderr line (in the log) says why
// when it failed.
func (p *Process) killContainer() {
	if p.ctr == nil {
		return
	}
	defer p.ctr.cleanup()
	id := p.ctr.id()
	var err error
	var outcome containerOutcome
	if p.reaper && p.ctrKill != nil {
		outcome = *p.ctrKill
		err = errors.New("the reaper's kill failed (its reason is in the server's stderr)")
	} else {
		// No reaper, or one that was killed before it could say (by
		// someone else, or by the backstop): do it here.
		var gone bool
		_, gone, err = p.ctr.kill()
		outcome = outcomeOf(id, gone, err)
	}
	switch outcome {
	case containerFailed:
		p.log.Error("could not kill the server's container; it may still run", "container", id, "error", err)
	case containerNone:
		p.log.Debug("the server's container was not running", "container", id)
	default:
		p.log.Info("killed the server's container", "container", id)
	}
}

// readReports reads what the dead reaper wrote after the server's pid: how
// the server ended, if it got to say so. The reaper is gone, so the pipe is
// at EOF after that; the deadline is only a guard.
func (p *Process) readReports() {
	_ = p.reportsF.SetReadDeadline(time.Now().Add(drainGrace))
	for {
		kind, n, err := readReport(p.reports)
		if err != nil {
			break
		}
		switch kind {
		case reportExit:
			p.served = &Exit{Code: n}
		case reportSignal:
			p.served = &Exit{Code: -1, Signal: syscall.Signal(n).String()}
		case reportContainer:
			o := containerOutcome(n)
			p.ctrKill = &o
		}
	}
	p.reportsF.Close()
}

// exitFrom says how the server ended: as the reaper reported it, else from
// the leader's wait status (the server's own, or the reaper's when it died
// before it could report).
func (p *Process) exitFrom(waitErr error) Exit {
	e := Exit{Code: -1, Reason: ReasonExited}
	if p.served != nil {
		e.Code, e.Signal = p.served.Code, p.served.Signal
	} else if ps := p.cmd.ProcessState; ps != nil {
		e.Code, e.Signal = ps.ExitCode(), signalName(ps)
	}
	if ee := (*exec.ExitError)(nil); waitErr != nil && !errors.As(waitErr, &ee) {
		e.Err = waitErr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reason != "" {
		e.Reason, e.Detail = p.reason, p.detail
	}
	return e
}
