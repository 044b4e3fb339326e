package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/internal/rawio"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/socket"
)

// The bridge of `mcpmux connect`: the client's stdin and stdout on one
// side, a session with the daemon (a link) on the other, lines passed
// through byte for byte. A link can end under a client that is still there
// (the daemon restarted or upgraded, or it closed the session because the
// server was replaced or came back with another protocol): the bridge then
// answers the requests that were in flight on it with their own ids,
// reaches a daemon again (starting one, as auto-start does), replays to
// the new session what the client said to set up the old one, tells the
// client that the lists may have changed, and goes on. The client's stdout
// is never closed in between. (The package doc lists the goroutines.)

// bridge is one `mcpmux connect` session.
type bridge struct {
	name      string        // the server
	drain     time.Duration // --drain
	reconnect time.Duration // --reconnect: how long to try to reach a daemon again; 0: not at all
	// dial reaches a daemon and opens a session on the server's socket;
	// path names the socket, for messages.
	dial   func(ctx context.Context) (conn net.Conn, path string, err error)
	stderr io.Writer
	out    *bufio.Writer // stdout; see the goroutines above for who writes it

	slot    slot           // the link up, for the stdin reader
	mem     memory         // what the client said that a new session must hear again
	readers sync.WaitGroup // the socket readers
	replays int            // ids of replayed requests made so far; run's goroutine only
}

// link is one session with the daemon.
type link struct {
	conn net.Conn
	path string
	br   *bufio.Reader // the socket reader's (before the link is up, the replay's)
	bw   *bufio.Writer // the stdin reader's (before the link is up, the replay's)
	t    tracker       // the requests forwarded on this link and not answered
	// swallow holds the ids of the requests the bridge replayed, whose
	// answers are not the client's; the replay fills it before the socket
	// reader starts, which alone uses it from then on.
	swallow map[string]bool
	changed []string    // tools, prompts, resources: the lists to tell the client of once the link is up
	ended   chan error  // 1-buffered: why the socket reader stopped
	wrote   atomic.Bool // anything was written on it: the client's lines, or a replay
	heard   atomic.Bool // the daemon sent a byte on it
	broken  atomic.Bool // a write to it failed as the daemon had closed it
	// wroteAtEnd: anything was written on it when its socket reader
	// stopped; what was written after, the daemon never read.
	wroteAtEnd atomic.Bool
}

func newLink(conn net.Conn, path string) *link {
	l := &link{
		conn:    conn,
		path:    path,
		br:      bufio.NewReaderSize(rawio.NewReader(conn), 64<<10),
		bw:      bufio.NewWriterSize(rawio.NewWriter(conn), 64<<10),
		swallow: map[string]bool{},
		ended:   make(chan error, 1),
	}
	l.t.init()
	return l
}

// write queues one line for the daemon. A failed write means the link is
// going: closing the connection makes sure its reader sees it too.
func (l *link) write(p []byte) {
	l.wrote.Store(true)
	if _, err := l.bw.Write(p); err != nil {
		l.failed(err)
	}
}

func (l *link) flush() {
	if err := l.bw.Flush(); err != nil {
		l.failed(err)
	}
}

// failed ends a link a write to which failed, noting when the daemon had
// closed it already (what was written then was never read).
func (l *link) failed(err error) {
	if isReset(err) {
		l.broken.Store(true)
	}
	l.conn.Close()
}

// isReset reports the errors of a connection the daemon closed with what
// the bridge sent unread, or before it was sent.
func isReset(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// unread reports whether the daemon closed l having sent nothing on it and
// read none of what the client sent, as a daemon does with a connection
// that stayed silent past its first_byte_timeout when the client's first
// line came just then (a slow client). What was sent goes out again, as
// it is, on the next link.
func (l *link) unread(cause error) bool {
	return !l.heard.Load() && l.wrote.Load() && (l.broken.Load() || isReset(cause))
}

// silent reports whether the daemon ended l cleanly having sent nothing
// on it while nothing had been written to it: a connection closed for
// staying silent past the daemon's first_byte_timeout. A line the client
// sends just then may still go out on l, after the daemon closed it and
// before the stdin reader learns of it: the daemon never read such a line,
// and it goes out again on the next link, as an unread one does.
func (l *link) silent(cause error) bool {
	return cause == nil && !l.heard.Load() && !l.wroteAtEnd.Load()
}

// refusal is the daemon refusing the session (too_many_sessions): its
// error line, which the requests in flight are answered with.
type refusal struct {
	frame   []byte // the error response, id null
	message string
	reason  string
}

func (r *refusal) Error() string { return fmt.Sprintf("%s (%s)", r.message, r.reason) }

// stdoutError is a write to the client that failed: the client is gone.
type stdoutError struct{ err error }

func (e *stdoutError) Error() string { return "write stdout: " + e.err.Error() }

// run bridges stdin and stdout over first, and over the links that follow
// it, until stdin ends and the answers due are in (nil), ctx ends (nil),
// or the bridge gives up.
func (b *bridge) run(ctx context.Context, first *link, stdin io.Reader) error {
	defer b.readers.Wait()
	defer b.slot.end()
	if err := b.up(first); err != nil {
		return err
	}
	stdinDone := make(chan error, 1)
	// The stdin reader is deliberately not waited for: a read from a
	// blocking stdin cannot be interrupted, and a client may keep its end
	// open after a signal arrived or the bridge gave up. It ends at stdin
	// EOF, once the slot says the bridge is over, or with the process,
	// which exits once run returns.
	go func() { stdinDone <- b.readStdin(stdin) }()
	l := first
	for {
		select {
		case err := <-stdinDone:
			return b.finish(ctx, l, err)
		case <-ctx.Done():
			b.stop(l)
			return nil
		case cause := <-l.ended:
			if testHookEnded != nil {
				testHookEnded(l)
			}
			next, err := b.recover(ctx, l, cause, stdinDone)
			if next == nil {
				return err
			}
			l = next
		}
	}
}

// testHookEnded, when a test sets it, runs as run learns that a link's
// socket reader stopped, before it retires the link.
var testHookEnded func(l *link)

// up tells the client what changed, starts the link's socket reader and
// hands the link to the stdin reader.
func (b *bridge) up(l *link) error {
	for _, kind := range l.changed {
		n, _ := jsonrpc.Notification("notifications/"+kind+"/list_changed", nil)
		b.out.Write(append(n, '\n'))
	}
	if err := b.out.Flush(); err != nil {
		l.conn.Close()
		return &stdoutError{err}
	}
	b.readers.Go(func() {
		err := b.readSocket(l)
		l.wroteAtEnd.Store(l.wrote.Load())
		l.ended <- err
	})
	b.slot.set(l)
	return nil
}

// stop ends the link up for good.
func (b *bridge) stop(l *link) {
	b.slot.end()
	l.conn.Close()
	l.ended <- <-l.ended // keep the reason for whoever else waits
}

// teardown retires a link whose socket reader has stopped: the stdin
// reader waits for the next link, and the requests that were in flight
// are answered now, with their ids. It returns how many were.
func (b *bridge) teardown(l *link, cause error) int {
	b.slot.clear()
	l.conn.Close()
	return b.answerLost(l.t.close(), cause)
}

// answerLost answers the requests in flight on a lost link, with their ids.
func (b *bridge) answerLost(ids [][]byte, cause error) int {
	var refused *refusal
	errors.As(cause, &refused)
	for _, id := range ids {
		b.out.Write(append(b.inFlightError(id, refused), '\n'))
	}
	b.out.Flush() // a client that is gone shows at the next write of a link
	return len(ids)
}

// inFlightError answers a request that was in flight on a lost link: with
// the daemon's own refusal when it refused the session, else daemon_gone.
func (b *bridge) inFlightError(id []byte, refused *refusal) []byte {
	if refused != nil {
		if m, err := jsonrpc.Parse(refused.frame); err == nil {
			return m.WithID(id)
		}
	}
	msg := "the mcpmux daemon closed the session with this request in flight"
	if b.reconnect > 0 {
		msg += "; mcpmux connect is reconnecting"
	}
	e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg, Reason: jsonrpc.ReasonDaemonGone, Server: b.name}
	return e.Response(id)
}

// recover retires a lost link and reaches the daemon again. next is nil
// when the bridge is over, err then saying why (nil: stdin ended or ctx
// did while there was nothing left to answer).
func (b *bridge) recover(ctx context.Context, l *link, cause error, stdinDone <-chan error) (next *link, err error) {
	if l.unread(cause) || l.silent(cause) {
		b.slot.clear()
		l.conn.Close()
		lines, ids, ok := l.t.closeUnheard()
		if ok {
			return b.quietly(ctx, stdinDone, lines)
		}
		b.answerLost(ids, cause)
	} else {
		b.teardown(l, cause)
	}
	var refused *refusal
	var out *stdoutError
	switch {
	case errors.As(cause, &out):
		return nil, out
	case errors.As(cause, &refused):
		return nil, fmt.Errorf("server %s refused the session on %s: %w", b.name, l.path, refused)
	case cause == nil && !l.wrote.Load():
		return b.quietly(ctx, stdinDone, nil)
	case b.reconnect <= 0:
		return nil, lost(l.path, cause)
	}
	fmt.Fprintf(b.stderr, "mcpmux: %v; reconnecting (for up to %s)\n", lost(l.path, cause), b.reconnect)
	start := time.Now()
	next, err = b.redial(ctx, stdinDone, b.reconnect, true)
	if next == nil {
		return nil, err
	}
	if err := b.up(next); err != nil {
		return nil, err
	}
	fmt.Fprintf(b.stderr, "mcpmux: reconnected to %s after %s\n", next.path, time.Since(start).Round(time.Millisecond))
	return next, nil
}

// quietRedial bounds the reaching again of a daemon that closed a link
// the client had not used yet, whatever --reconnect says.
const quietRedial = 30 * time.Second

// quietly reaches the daemon again, saying nothing, after it closed a
// link on which nothing was sent yet: the daemon closes connections that
// stay silent past its first_byte_timeout, and a client that waits that
// long before its first message has lost nothing. Nothing is replayed:
// the daemon heard nothing, and what the client sends meanwhile (its
// initialize, say) waits for the new link and goes out on it as it is.
// The lines the lost link never read (link.unread) go out first, as they
// are, tracked on the new link.
func (b *bridge) quietly(ctx context.Context, stdinDone <-chan error, lines [][]byte) (*link, error) {
	next, err := b.redial(ctx, stdinDone, max(b.reconnect, quietRedial), false)
	if next == nil {
		return nil, err
	}
	for _, line := range lines {
		next.t.sentLine(asks{msgs: messages(line)}, line, nil)
		next.write(line)
	}
	next.flush()
	return next, b.up(next)
}

// lost says how a link ended.
func lost(path string, cause error) error {
	if cause == nil {
		return fmt.Errorf("the daemon closed the session on %s", path)
	}
	return fmt.Errorf("session on %s: %w", path, socket.Cause(cause))
}

// Reconnection backoff: the first attempt at once, then waits from
// redialFirst doubling to redialMax, each with jitter.
const (
	redialFirst = 50 * time.Millisecond
	redialMax   = 2 * time.Second
)

// redial reaches a daemon again within the reconnect bound. next is nil
// when it gave up (err says why), when ctx ended, or when stdin ended
// meanwhile (there is nothing left to send, and nothing was due: the lost
// link's requests have been answered).
func (b *bridge) redial(ctx context.Context, stdinDone <-chan error, bound time.Duration, replay bool) (next *link, err error) {
	dctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	wait := redialFirst
	for attempt := 1; ; attempt++ {
		l, err := b.attempt(dctx, replay)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if finalDialError(err) || dctx.Err() != nil {
			return nil, fmt.Errorf("gave up reconnecting to server %s after %d attempts in %s: %w", b.name, attempt, bound, err)
		}
		pause := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-pause.C:
		case <-dctx.Done():
			pause.Stop()
			if ctx.Err() != nil {
				return nil, nil
			}
			return nil, fmt.Errorf("gave up reconnecting to server %s after %d attempts in %s: %w", b.name, attempt, bound, err)
		case err := <-stdinDone:
			pause.Stop()
			if err != nil {
				return nil, fmt.Errorf("read stdin: %w", err)
			}
			return nil, nil
		}
		wait = min(2*wait, redialMax)
	}
}

// attempt opens one new link and, with replay, replays the client's
// session on it.
func (b *bridge) attempt(ctx context.Context, replay bool) (*link, error) {
	conn, path, err := b.dial(ctx)
	if err != nil {
		return nil, err
	}
	l := newLink(conn, path)
	if !replay {
		return l, nil
	}
	if err := b.replay(ctx, l); err != nil {
		conn.Close()
		return nil, err
	}
	return l, nil
}

// finalDialError reports whether reaching the daemon again is pointless:
// a socket folder or a daemon of another user, or a server the config no
// longer has.
func finalDialError(err error) bool {
	var unknown *unknownServerError
	return errors.Is(err, socket.ErrUnsafeDir) || errors.Is(err, socket.ErrForeignPeer) || errors.As(err, &unknown)
}

// finish is the end of stdin: it waits, at most drain, for the answers
// still due on the link up, then hangs up.
func (b *bridge) finish(ctx context.Context, l *link, stdinErr error) error {
	if stdinErr != nil {
		b.stop(l)
		return fmt.Errorf("read stdin: %w", stdinErr)
	}
	timer := time.NewTimer(b.drain)
	defer timer.Stop()
	select {
	case <-l.t.idle():
	case <-ctx.Done():
	case <-timer.C:
		if n := l.t.count(); n > 0 {
			b.stop(l)
			return fmt.Errorf("--drain %s passed with %d %s still due from %s; hanging up", b.drain, n, answers(n), l.path)
		}
	case cause := <-l.ended:
		n := b.teardown(l, cause)
		var refused *refusal
		switch {
		case errors.As(cause, &refused):
			return fmt.Errorf("server %s refused the session on %s: %w", b.name, l.path, refused)
		case n > 0:
			return fmt.Errorf("%v with %d %s still due (answered with %s errors)", lost(l.path, cause), n, answers(n), jsonrpc.ReasonDaemonGone)
		}
		return nil
	}
	b.stop(l)
	return nil
}

// answers is "answer" or "answers", for n of them.
func answers(n int) string {
	if n == 1 {
		return "answer"
	}
	return "answers"
}

// slot holds the link up, for the stdin reader, which waits in get while
// there is none.
type slot struct {
	mu   sync.Mutex
	cur  *link
	over bool
	wake chan struct{} // closed while cur is set or the bridge is over
}

// get returns the link up, waiting for one; nil once the bridge is over.
func (s *slot) get() *link {
	for {
		l, over, wake := s.look()
		if l != nil || over {
			return l
		}
		<-wake
	}
}

func (s *slot) look() (l *link, over bool, wake chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.cur, s.over, s.wake
}

func (s *slot) set(l *link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fillLocked(l, false)
}

func (s *slot) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && !s.over {
		s.cur, s.wake = nil, make(chan struct{})
	}
}

func (s *slot) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fillLocked(nil, true)
}

// fillLocked puts l in the slot, and ends it if over, waking whoever waits
// for an empty slot to fill; an ended slot stays as it is.
func (s *slot) fillLocked(l *link, over bool) {
	if s.over {
		return
	}
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	if s.cur == nil {
		close(s.wake)
	}
	s.cur, s.over = l, over
}

// tracker knows which requests forwarded on a link are still unanswered.
// Once closed (the link is lost) it takes no more.
type tracker struct {
	mu      sync.Mutex
	pending map[string]struct{} // the ids, as written
	order   []string            // ids in the order sent, for answering them in order
	closed  bool
	idleCh  chan struct{} // made when idle is asked for while requests are pending, closed once none is

	// The client's lines sent before the daemon first spoke on the link,
	// to send again should it turn out the daemon never read them
	// (link.unread); at most unheardMax bytes, else none.
	unheard [][]byte
	size    int
	spoiled bool // too much, or a long line, was sent: none can be sent again
	heard   bool // the daemon spoke: nothing is sent again
}

// unheardMax bounds what a link keeps of the client's lines until the
// daemon first speaks on it.
const unheardMax = 1 << 20

// asks is what a client's line asks of the daemon, for the tracker: the
// messages of a line that was parsed, or the id of the one request of a
// line that was only scanned (nil: none).
type asks struct {
	msgs []*jsonrpc.Message
	id   []byte
}

// sentLine is sent for a whole line (tail: the newline deliver adds, if
// any), which is also kept while the daemon has not spoken on the link.
func (t *tracker) sentLine(a asks, line, tail []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.sentLocked(a.msgs) {
		return false
	}
	if a.id != nil {
		t.pendLocked(a.id)
	}
	if !t.heard && !t.spoiled {
		t.keepLocked(append(append([]byte(nil), line...), tail...))
	}
	return true
}

func (t *tracker) keepLocked(line []byte) {
	if t.size += len(line); t.size > unheardMax {
		t.unheard, t.spoiled = nil, true
		return
	}
	t.unheard = append(t.unheard, line)
}

// spoil notes a line sent that is not kept (a long one).
func (t *tracker) spoil() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unheard, t.spoiled = nil, true
}

// spoke notes the daemon's first byte on the link.
func (t *tracker) spoke() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unheard, t.heard = nil, true
}

// closeUnheard is close for a link the daemon never read: with the lines
// to send again, and ok when they are all of what was sent (else the ids
// are to be answered, as after close).
func (t *tracker) closeUnheard() (lines, ids [][]byte, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ok = !t.heard && !t.spoiled && len(t.unheard) > 0
	lines, t.unheard = t.unheard, nil
	return lines, t.closeLocked(), ok
}

func (t *tracker) init() {
	t.pending = make(map[string]struct{})
}

// sentLocked notes the requests of a line before it goes out; false when
// the link is lost and the line must wait for the next one. t.mu is held.
func (t *tracker) sentLocked(msgs []*jsonrpc.Message) bool {
	if t.closed {
		return false
	}
	for _, m := range msgs {
		switch {
		case m.Kind == jsonrpc.KindNotification && m.Method == "notifications/cancelled":
			// A cancelled request gets no answer: stop waiting for it.
			if span, ok := m.ParamsPath("requestId"); ok {
				t.settleLocked(m.Frame[span.Start:span.End])
			}
		case m.Kind == jsonrpc.KindRequest:
			t.pendLocked(m.ID)
		}
	}
	return true
}

// pendLocked notes a request with id as pending. t.mu is held.
func (t *tracker) pendLocked(id []byte) {
	if _, dup := t.pending[string(id)]; dup {
		return
	}
	k := string(id)
	t.order = append(t.order, k)
	t.pending[k] = struct{}{}
}

func (t *tracker) settle(id []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settleLocked(id)
}

func (t *tracker) settleLocked(id []byte) {
	if _, ok := t.pending[string(id)]; !ok {
		return
	}
	delete(t.pending, string(id))
	switch {
	case len(t.pending) == 0:
		t.wakeIdleLocked()
		t.order = t.order[:0]
	case len(t.order) > 2*len(t.pending)+64:
		// A request that stays pending (a listen) must not make the
		// order of the others grow for good.
		t.order = slices.DeleteFunc(t.order, func(k string) bool { _, ok := t.pending[k]; return !ok })
	}
}

// close takes the requests still pending, in the order they were sent,
// and refuses new ones.
func (t *tracker) close() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closeLocked()
}

func (t *tracker) closeLocked() [][]byte {
	t.closed = true
	var ids [][]byte
	for _, k := range t.order {
		if _, ok := t.pending[k]; ok {
			ids = append(ids, []byte(k))
			delete(t.pending, k)
		}
	}
	t.wakeIdleLocked()
	t.order = nil
	return ids
}

// idle is closed once nothing is pending (at once if nothing is). The
// channel is made only for whoever waits (finish), not at every request.
func (t *tracker) idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 {
		return closedChan()
	}
	if t.idleCh == nil {
		t.idleCh = make(chan struct{})
	}
	return t.idleCh
}

// wakeIdleLocked wakes whoever waits in idle. t.mu is held.
func (t *tracker) wakeIdleLocked() {
	if t.idleCh != nil {
		close(t.idleCh)
		t.idleCh = nil
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}
