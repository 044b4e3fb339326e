package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// drainGrace is how long, after the server has been reaped, the stdout and
// stderr readers get to reach EOF on their own before their pipes are closed
// under them. Only a descendant that left the process group can still hold
// those pipes by then; it must not keep Done from closing.
const drainGrace = 100 * time.Millisecond

// Handler receives what the server writes. Both methods run on the reader
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
}

// Process is one run of one server. Its methods are safe for concurrent use.
type Process struct {
	cfg Config
	h   Handler
	log *slog.Logger
	cmd *exec.Cmd
	pid int

	stdin  *os.File // our write end; only writeLoop writes to it
	stdout *os.File // our read end; only readLoop reads it
	stderr *os.File // our read end of the stderr pipe, when we read stderr at all
	tail   *ring    // last stderr lines, StderrLog only

	mu       sync.Mutex
	queue    [][]byte      // frames waiting for writeLoop
	queued   int           // bytes waiting, newlines included
	room     chan struct{} // closed while queued <= WriteQueueBytes, replaced when it rises above
	roomOpen bool          // room is closed
	closed   bool          // Send refuses; closing is closed; stdin is closed
	reason   string        // why mcpmux ended the process; the first one set wins
	stopping bool          // a Stop call drives the escalation
	dead     bool          // the leader has exited: no more signals to its group

	ready    chan struct{} // 1-buffered: the queue is not empty
	closing  chan struct{} // closed with closed
	ending   chan struct{} // closed when reason is set
	exited   chan struct{} // closed once the leader has exited and been reaped
	readDone chan struct{} // closed when readLoop stops reading stdout
	errDone  chan struct{} // closed when the stderr reader stops (at once if there is none)
	done     chan struct{} // closed last, by waitLoop
	exit     Exit          // written before done is closed

	wg sync.WaitGroup // readLoop, writeLoop, the stderr reader
}

// Start spawns the server and returns once it runs. The executable is
// resolved afresh on every call and run directly, never through a shell, as
// the leader of a new process group.
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
	if cfg.Dir != "" {
		// Checked here because a failed chdir in the child reads as
		// "fork/exec <command>: no such file or directory".
		if fi, err := os.Stat(cfg.Dir); err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("working directory %s is not a directory", cfg.Dir)
		}
	}

	// The child's ends are closed here once it has its copies; ours only if
	// the start fails, else by the Process.
	var childEnds, ourEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
		if err != nil {
			for _, f := range ourEnds {
				f.Close()
			}
		}
	}()
	// pipe returns a pipe whose read (toChild false) or write (toChild
	// true) end is ours. Our own pipes rather than StdoutPipe: Wait would
	// close the read end under the reader, and we read to EOF after the reap.
	pipe := func(toChild bool) (ours, theirs *os.File, err error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		if toChild {
			ours, theirs = w, r
		} else {
			ours, theirs = r, w
		}
		ourEnds, childEnds = append(ourEnds, ours), append(childEnds, theirs)
		return ours, theirs, nil
	}
	stdinW, stdinR, err := pipe(true)
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := pipe(false)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{cfg.Command}, cfg.Args...),
		Env:         childEnv(cfg.Environ, cfg.InheritEnv, cfg.Env),
		Dir:         cfg.Dir,
		Stdin:       stdinR,
		Stdout:      stdoutW,
		SysProcAttr: sysProcAttr(),
	}

	var stderrR *os.File // read by stderrLoop
	var copyTo io.Writer // StderrInherit to a writer that is not a file
	switch cfg.Stderr {
	case StderrLog:
		if stderrR, cmd.Stderr, err = pipe(false); err != nil {
			return nil, err
		}
	case StderrInherit:
		if f, ok := cfg.StderrInherit.(*os.File); ok {
			cmd.Stderr = f // the daemon's own stderr: handed over, no copying
			break
		}
		if stderrR, cmd.Stderr, err = pipe(false); err != nil {
			return nil, err
		}
		copyTo = cfg.StderrInherit
	case StderrDiscard:
		// nil: os/exec connects the null device.
	case StderrFile:
		f, err := os.OpenFile(cfg.StderrPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		cmd.Stderr = f
		childEnds = append(childEnds, f)
	}

	if err := cmd.Start(); err != nil {
		return nil, err
	}

	p = &Process{
		cfg:      cfg,
		h:        h,
		cmd:      cmd,
		pid:      cmd.Process.Pid,
		stdin:    stdinW,
		stdout:   stdoutR,
		stderr:   stderrR,
		room:     make(chan struct{}),
		roomOpen: true,
		ready:    make(chan struct{}, 1),
		closing:  make(chan struct{}),
		ending:   make(chan struct{}),
		exited:   make(chan struct{}),
		readDone: make(chan struct{}),
		errDone:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	close(p.room)
	if cfg.Stderr == StderrLog {
		p.tail = newRing(cfg.StderrTailLines)
	}
	p.log = cfg.Logger.With("server", cfg.Name, "pid", p.pid)
	p.log.Info("server started", "command", path)

	p.wg.Go(p.readLoop)
	p.wg.Go(p.writeLoop)
	if stderrR != nil {
		p.wg.Go(func() { p.stderrLoop(copyTo) })
	} else {
		close(p.errDone)
	}
	// waitLoop owns the goroutines above: it waits for them, and closing
	// done is the last thing it does.
	go p.waitLoop()
	return p, nil
}

// Pid is the server's process id, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// Send queues one frame for the server's stdin; the writer adds the newline,
// so frame must not end with one (nor contain one). It never blocks. The
// Process keeps frame until it is written: the caller must not change it.
// Send returns ErrClosed once the process is on its way out, and
// ErrQueueFull if the frame would take the queued bytes past twice
// WriteQueueBytes.
func (p *Process) Send(frame []byte) error {
	n := len(frame) + 1
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return ErrClosed
	case p.queued+n > 2*p.cfg.WriteQueueBytes:
		p.mu.Unlock()
		return ErrQueueFull
	}
	p.queue = append(p.queue, frame)
	p.queued += n
	if p.queued > p.cfg.WriteQueueBytes && p.roomOpen {
		p.room, p.roomOpen = make(chan struct{}), false
	}
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default:
	}
	return nil
}

// WaitWritable is the flow control of the sessions: each calls it before it
// reads its next frame. It returns nil at once while the queued bytes are at
// most WriteQueueBytes, and otherwise blocks until they are, ctx is done
// (returning its cause), or the process is on its way out (ErrClosed).
func (p *Process) WaitWritable(ctx context.Context) error {
	for {
		p.mu.Lock()
		closed, room := p.closed, p.room
		below := p.queued <= p.cfg.WriteQueueBytes
		p.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case below:
			return nil
		}
		select {
		case <-room:
		case <-p.closing:
			return ErrClosed
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Queued reports the bytes waiting to be written to stdin, newlines
// included; 0 once the process is on its way out.
func (p *Process) Queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queued
}

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
// SIGKILL to the group. Once the leader has gone, whatever is left of the
// group is killed too, and Stop returns after Done. Exit.Reason is then
// ReasonStopped, unless the process was already ending for another reason.
//
// Stop is idempotent and safe to call concurrently or after the process
// exited by itself; one caller drives the escalation and all of them wait.
// ctx cancels only the waiting: when it is done first, Stop skips straight
// to SIGKILL, still waits for Done, and returns ctx's cause wrapped.
func (p *Process) Stop(ctx context.Context) error {
	p.end(ReasonStopped)
	p.mu.Lock()
	first := !p.stopping
	p.stopping = true
	p.mu.Unlock()
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

// Kill sends SIGKILL to the process group at once; Done follows. reason
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
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.queue, p.queued = nil, 0
	close(p.closing)
	p.mu.Unlock()
	p.stdin.Close() // a Write blocked in writeLoop returns at once
}

// signal sends sig to the process group, unless the leader is gone: once it
// has been reaped its pid, and so the group id, may belong to someone else.
func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dead {
		signalGroup(p.pid, sig)
	}
}

// killGroup marks the leader dead and kills whatever is left in its group:
// descendants that outlived it (an npx or uv wrapper's children, a server's
// helpers). No one signals the group after this.
func (p *Process) killGroup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = true
	signalGroup(p.pid, syscall.SIGKILL)
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
	if waitExitNoReap(p.pid) {
		// The leader is a zombie: its pid, and so its group id, cannot be
		// reused yet, so killing the group now cannot hit a stranger.
		p.killGroup()
		err = p.cmd.Wait()
	} else {
		// No way to wait without reaping here. Between the reap and the
		// kill a new process could in theory take the group id; only a
		// reaper process that leads the group (DESIGN.md) closes this.
		err = p.cmd.Wait()
		p.killGroup()
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

	p.exit = p.exitFrom(err)
	p.log.Info("server exited", "exit", p.exit.String())
	close(p.done)
}

func (p *Process) exitFrom(waitErr error) Exit {
	e := Exit{Code: -1, Reason: ReasonExited}
	if ps := p.cmd.ProcessState; ps != nil {
		e.Code, e.Signal = ps.ExitCode(), signalName(ps)
	}
	if ee := (*exec.ExitError)(nil); waitErr != nil && !errors.As(waitErr, &ee) {
		e.Err = waitErr
	}
	p.mu.Lock()
	if p.reason != "" {
		e.Reason = p.reason
	}
	p.mu.Unlock()
	return e
}
