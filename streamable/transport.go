package streamable

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/outbox"
)

// finishedKept is how many finished POST streams a session keeps for
// resumption.
const finishedKept = 16

// errSessionGone: the HTTP session ended while a request was on its way in.
var errSessionGone = errors.New("streamable: HTTP session ended")

// inbound is a frame a request hands to the session, with its tag.
type inbound struct {
	frame []byte
	tag   uint64
}

// transport is one HTTP session of the 2025 binding, as the
// session.Transport of the mcpmux session that serves it. ReadFrame takes
// the messages that POSTs deliver, each with the tag of its stream;
// WriteFrames puts each frame on the stream its tag names.
type transport struct {
	id           string
	server       string
	idle         time.Duration
	writeTimeout time.Duration
	expire       func()        // ends the session after idle time
	dormant      time.Duration // idle time after which a session that never streamed sleeps; 0: never
	sleep        func()        // ends a dormant session, its record kept
	asleep       atomic.Bool   // ended dormant: its record stays

	in        chan inbound  // unbuffered: a POST returns once the session took its message
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	eventNo   atomic.Uint64 // numbers the events; unique within the session

	rest   []outbox.Frame // what a partial TryWrite left, placed first next time (the outbox's writer side only)
	budget *replayBudget  // what its streams keep for resumption
	posts  chan struct{}  // a token per POST being read or handed over: max_inflight at most
	memo   *memo          // what the client set up, kept in the store; nil without one
	log    *slog.Logger   // for a record that cannot be written; set with memo

	mu         sync.Mutex
	streams    map[uint64]*stream // by tag; 0: the GET stream
	nextTag    uint64
	finished   []uint64 // finished POST streams still kept, oldest first
	busy       int      // requests being served
	idleTimer  *time.Timer
	lastActive time.Time // when its last request began or ended
	getStream  bool      // a GET stream was opened: the session never goes dormant
}

// newTransport makes a session named id ("": a new name) whose streams
// keep within budget, which takes at most maxPOSTs POSTs at once.
func newTransport(id, server string, idle, writeTimeout time.Duration, budget *replayBudget, maxPOSTs int) *transport {
	if id == "" {
		id = rand.Text() // 128 bits, base32: visible ASCII
	}
	return &transport{
		id:           id,
		server:       server,
		idle:         idle,
		writeTimeout: writeTimeout,
		in:           make(chan inbound),
		done:         make(chan struct{}),
		budget:       budget,
		posts:        make(chan struct{}, maxPOSTs),
		streams:      map[uint64]*stream{0: newStream(0, budget)},
		nextTag:      1,
		lastActive:   time.Now(),
	}
}

// renumber starts the numbers of a session made again after a restart
// (its POST streams, its events) above any its earlier daemon gave: a
// client resuming with an event id of that daemon's must not be taken
// for one asking for events of this one. The numbers start from the time
// in milliseconds times 2^20, so an earlier daemon would have needed over
// a million events a millisecond to reach them.
func (t *transport) renumber() {
	base := uint64(time.Now().UnixMilli()) << 20
	t.eventNo.Store(base)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextTag = base + 1
}

// takePOST waits for room for one more POST of the session: those being
// read and handed over count against max_inflight, so that a client that
// opens many at once holds no more bodies than the session would read.
// The release function gives the room back; false: the client left or the
// session ended first.
func (t *transport) takePOST(ctx context.Context) (release func(), ok bool) {
	select {
	case t.posts <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-t.posts }) }, true
	case <-t.done:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
}

// ReadFrame implements session.Transport.
func (t *transport) ReadFrame() ([]byte, uint64, error) {
	select {
	case in := <-t.in:
		return in.frame, in.tag, nil
	case <-t.done:
		return nil, 0, net.ErrClosed
	}
}

// Buffered implements session.Transport: a POST hands its message over
// only when the session reads, so none is ever at hand.
func (t *transport) Buffered() bool { return false }

// deliver hands frame to the session under tag; it returns once the
// session has read it.
func (t *transport) deliver(ctx context.Context, frame []byte, tag uint64) error {
	select {
	case t.in <- inbound{frame, tag}:
		return nil
	case <-t.done:
		return errSessionGone
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements session.Transport: the session ends, and so does every
// stream's connection.
func (t *transport) Close() error {
	t.closeOnce.Do(func() {
		close(t.done)
		for _, st := range t.allStreams() {
			st.end()
			st.release()
		}
	})
	return nil
}

func (t *transport) allStreams() []*stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idleTimer != nil {
		t.idleTimer.Stop()
	}
	out := make([]*stream, 0, len(t.streams))
	for _, st := range t.streams {
		out = append(out, st)
	}
	return out
}

func (t *transport) closed() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// enter and leave bracket each request of the session; a session with none
// for its idle time expires.
func (t *transport) enter() {
	t.memo.touch()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy++
	t.lastActive = time.Now()
	if t.idleTimer != nil {
		t.idleTimer.Stop()
	}
}

func (t *transport) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.busy--
	t.lastActive = time.Now()
	if t.busy > 0 || t.expire == nil {
		return
	}
	wait := t.idle
	if t.sleepsLocked() {
		wait = t.dormant
	}
	if t.idleTimer == nil {
		t.idleTimer = time.AfterFunc(wait, t.expireIfIdle)
	} else {
		t.idleTimer.Reset(wait)
	}
}

// streamed notes that the session opened a GET stream: a client that
// listens is there, however quiet.
func (t *transport) streamed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.getStream = true
}

// sleepsLocked: the session goes dormant, not expired, when idle.
func (t *transport) sleepsLocked() bool { return t.sleep != nil && !t.getStream }

func (t *transport) expireIfIdle() {
	idle, sleeps := t.isIdle()
	switch {
	case !idle:
	case sleeps:
		t.sleep()
	default:
		t.expire()
	}
}

func (t *transport) isIdle() (idle, sleeps bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.busy == 0, t.sleepsLocked()
}

// idleSince is when the session last had a request, zero while it has one.
func (t *transport) idleSince() (since time.Time, idle bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastActive, t.busy == 0
}

// WriteFrames implements session.Transport: each frame goes on the stream
// of its tag, is kept there for resumption, and is written to the stream's
// connection if one is attached; the last frame for a tag ends its stream.
// A slow connection slows the session's writer (and so fills its outbox);
// a dead one is let go, and the frames wait for the client to resume the
// stream. A frame for a stream that is gone or finished is dropped.
func (t *transport) WriteFrames(frames []outbox.Frame) error {
	if len(t.rest) > 0 {
		frames = append(t.rest, frames...)
		t.rest = nil
	}
	for _, f := range frames {
		if t.closed() {
			return net.ErrClosed
		}
		st, final := t.place(f)
		if st == nil || (f.Data == nil && !final) {
			continue
		}
		var no uint64
		if f.Data != nil {
			no = t.eventNo.Add(1)
		}
		st.push(no, f, final)
		t.trimReplay()
		if final {
			st.end()
		}
	}
	return nil
}

// trimReplay drops delivered events, of the oldest streams first, while
// the session or the daemon keeps more than its bound for resumption:
// what a client has read is kept only within the bounds; what it has not
// read yet is kept for it.
func (t *transport) trimReplay() {
	if !t.budget.over() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	nos := slices.Sorted(maps.Keys(t.streams))
	for _, no := range nos {
		if t.streams[no].dropDelivered() {
			return
		}
	}
}

// TryWrite implements outbox.Writer: it places frames from the caller's
// goroutine as far as that cannot block, so that a quick answer reaches its
// POST with no goroutine handoff. A frame for a stream that is gone is
// dropped, one for a stream without a connection is kept, and the final
// event of a POST stream goes into the response's buffer, to leave with
// the end of the response, when it fits there. It stops at a frame that
// would be written and flushed, that would take the replay past its bound,
// or whose streams are busy: the rest is kept, and goes first in the
// WriteFrames the queue then owes.
func (t *transport) TryWrite(frames []outbox.Frame) (ok, more bool) {
	if len(t.rest) > 0 {
		return false, false
	}
	for i, f := range frames {
		if t.tryPlace(f) {
			continue
		}
		if i == 0 {
			return false, false
		}
		t.rest = append(t.rest[:0], frames[i:]...)
		return true, true
	}
	return true, false
}

// responseBuffer is what an HTTP response buffers before it writes to the
// connection (net/http's, before chunking): an event that fits in it, into
// an empty buffer, is only copied.
const responseBuffer = 2048

// tryPlace does for f what WriteFrames does, when none of it can block; it
// reports false, having done nothing, when some of it could. Every lock is
// taken with TryLock below the transport's, so it never waits on a write in
// progress.
func (t *transport) tryPlace(f outbox.Frame) bool {
	if t.closed() {
		return false // WriteFrames reports it
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.streams[f.Tag]
	final := f.Last && f.Tag != 0
	switch {
	case st == nil || st.finished || (f.Data == nil && !final):
		return true // nothing to do, as for WriteFrames
	case !t.budget.fits(len(f.Data)) || !st.mu.TryLock():
		return false
	}
	defer st.mu.Unlock()
	// A stream's connection has nothing buffered between writes: every
	// event but a final one is flushed.
	if st.conn != nil && (!final || eventSize(f.Data) > responseBuffer) {
		return false
	}
	if final && !t.tryFinish(st) {
		return false
	}
	var no uint64
	if f.Data != nil {
		no = t.eventNo.Add(1)
	}
	st.pushLocked(no, f, final)
	if final {
		st.endLocked()
	}
	return true
}

// tryFinish finishes st, with the stream that retires (if any) locked by
// TryLock; false, having done nothing, when that lock is taken. The caller
// holds t's lock and st's.
func (t *transport) tryFinish(st *stream) bool {
	old := t.retiring()
	if old != nil {
		if !old.mu.TryLock() {
			return false
		}
		defer old.mu.Unlock()
	}
	t.finishWith(st, old)
	return true
}

// eventSize bounds the length of writeSSE's encoding of data: its id line
// (two numbers of up to 20 digits), its event line, a data line's prefix
// per line, and the blank line that ends it.
func eventSize(data []byte) int {
	return len(data) + 7*bytes.Count(data, []byte{'\n'}) + 96
}

// place finds the stream of a frame; final means the frame is the last of
// its POST stream (the GET stream never ends this way). nil: the stream is
// gone or finished.
func (t *transport) place(f outbox.Frame) (st *stream, final bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st = t.streams[f.Tag]
	if st == nil || st.finished {
		return nil, false
	}
	if f.Last && f.Tag != 0 {
		t.finishLocked(st)
		return st, true
	}
	return st, false
}

// finishLocked retires a POST stream: nothing more comes on it, and it is
// kept a while for resumption.
func (t *transport) finishLocked(st *stream) {
	if st.finished || st.no == 0 {
		return
	}
	old := t.retiring()
	if old != nil {
		old.mu.Lock()
		defer old.mu.Unlock()
	}
	t.finishWith(st, old)
}

// retiring is the finished stream that finishing one more lets go of (the
// oldest, once finishedKept are kept), or nil.
func (t *transport) retiring() *stream {
	if len(t.finished) < finishedKept {
		return nil
	}
	return t.streams[t.finished[0]]
}

// finishWith is finishLocked for a POST stream not yet finished, given
// retiring's stream, locked by the caller, or nil.
func (t *transport) finishWith(st, old *stream) {
	st.finished = true
	t.finished = append(t.finished, st.no)
	if len(t.finished) > finishedKept {
		if old != nil {
			old.releaseLocked()
		}
		delete(t.streams, t.finished[0])
		t.finished = t.finished[1:]
	}
}

// openPOST opens the stream of a POST that carries requests; its number
// is the tag the POST's frame is delivered under.
func (t *transport) openPOST() *stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := newStream(t.nextTag, t.budget)
	t.nextTag++
	t.streams[st.no] = st
	return st
}

// drop forgets a stream at once, without keeping it for resumption: the
// stream of a request mcpmux made itself.
func (t *transport) drop(st *stream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.streams, st.no)
	st.release()
}

// abandon retires a POST stream whose frame never reached the session, and
// ends its connection.
func (t *transport) abandon(st *stream) {
	t.retire(st)
	st.end()
}

func (t *transport) retire(st *stream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finishLocked(st)
}

// stream finds a stream by number.
func (t *transport) stream(no uint64) *stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streams[no]
}

// KeepFolder keeps the folder the session's roots told (share = "project")
// in its record, so that a later daemon serves it in the same project.
func (t *transport) KeepFolder(dir string) {
	if err := t.memo.keepFolder(dir); err != nil {
		t.log.Warn("cannot keep the HTTP session's project for after a restart", "server", t.server, "http_session", t.id, "error", err)
	}
}
