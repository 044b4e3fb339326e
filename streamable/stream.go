package streamable

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/outbox"
)

// Bounds of what a stream keeps for Last-Event-ID resumption, and its
// timers.
const (
	replayEvents = 256     // events kept per stream
	replayBytes  = 1 << 20 // bytes kept per stream (the newest is kept until delivered)
	sseKeepalive = 25 * time.Second
)

// stream is one SSE stream of a session: the GET stream (number 0) or the
// stream of one POST, numbered by the tag of the frame it delivered. It
// keeps its last events for resumption, and writes to the connection it
// is attached to, if any.
type stream struct {
	no uint64

	// Under the session's mu.
	finished bool // its last frame came, or its POST never reached the session

	budget *replayBudget // what the session's streams keep, with the daemon's
	over   chan struct{} // closed when no more events will come

	mu        sync.Mutex
	events    []event // the newest, for resumption
	bytes     int
	delivered uint64 // number of the last event written to a connection
	ended     bool   // no more events will come
	released  bool   // forgotten: it keeps nothing more
	conn      *sseConn
}

func newStream(no uint64, b *replayBudget) *stream {
	return &stream{no: no, budget: b, over: make(chan struct{})}
}

type event struct {
	no      uint64 // the session's event number
	data    []byte
	release func() // gives data's buffer back once the stream lets go of it (outbox.Frame.Release); nil: nothing to give
}

// free gives the event's buffer back: nothing holds its data any more.
func (ev event) free() {
	if ev.release != nil {
		ev.release()
	}
}

// sseConn is the HTTP response a stream is written to.
type sseConn struct {
	rw           http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	done         chan struct{} // closed when the stream lets go of it
	started      bool          // the headers went out
	headerTimer  *time.Timer   // startSoon's, stopped once the headers go with an event
}

func newSSEConn(rw http.ResponseWriter, writeTimeout time.Duration) *sseConn {
	return &sseConn{rw: rw, rc: http.NewResponseController(rw), writeTimeout: writeTimeout, done: make(chan struct{})}
}

// eventID names event no of stream st: unique within the session, and
// naming its stream.
func eventID(st, no uint64) string {
	return strconv.FormatUint(st, 10) + "-" + strconv.FormatUint(no, 10)
}

// parseEventID undoes eventID.
func parseEventID(id string) (st, no uint64, ok bool) {
	a, b, ok := strings.Cut(id, "-")
	if !ok {
		return 0, 0, false
	}
	st, err1 := strconv.ParseUint(a, 10, 64)
	no, err2 := strconv.ParseUint(b, 10, 64)
	return st, no, err1 == nil && err2 == nil
}

// push adds an event numbered no to the stream (none when f.Data is nil)
// and writes it if a connection is attached; final: it is the stream's last
// (the caller then ends the stream, once it has trimmed the replay: the
// client may read the end of the response as soon as the stream ends).
// f's buffer is given back (f.Release) when the stream lets go of the
// event: every use of an event's data is under st.mu, and writes to the
// connection hold none of it once they return.
func (st *stream) push(no uint64, f outbox.Frame, final bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pushLocked(no, f, final)
}

func (st *stream) pushLocked(no uint64, f outbox.Frame, final bool) {
	data := f.Data
	if data == nil || st.released {
		event{release: f.Release}.free()
		return
	}
	ev := event{no: no, data: data, release: f.Release}
	st.events = append(st.events, ev)
	st.bytes += len(data)
	st.budget.add(len(data))
	if st.conn != nil {
		st.writeLocked(ev, final)
	}
	st.trimLocked()
}

// trimLocked drops the oldest events beyond the stream's bounds; the
// newest is kept while it has not been delivered.
func (st *stream) trimLocked() {
	for len(st.events) > 0 {
		if len(st.events) == 1 && st.events[0].no > st.delivered {
			return
		}
		if len(st.events) <= replayEvents && st.bytes <= replayBytes {
			return
		}
		st.dropHeadLocked()
	}
}

func (st *stream) dropHeadLocked() {
	st.bytes -= len(st.events[0].data)
	st.budget.add(-len(st.events[0].data))
	st.events[0].free()
	st.events[0] = event{}
	st.events = st.events[1:]
}

// dropDelivered drops the stream's oldest delivered events while the
// session or the daemon keeps more than its bound; false when it is
// still over once the stream has none left.
func (st *stream) dropDelivered() (within bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for st.budget.over() {
		if len(st.events) == 0 || st.events[0].no > st.delivered {
			return false
		}
		st.dropHeadLocked()
	}
	return true
}

// release forgets what the stream keeps, and keeps nothing more: the
// session forgot the stream, or ended.
func (st *stream) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.releaseLocked()
}

func (st *stream) releaseLocked() {
	for _, ev := range st.events {
		ev.free()
	}
	st.budget.add(-st.bytes)
	st.events, st.bytes, st.released = nil, 0, true
}

func (st *stream) endLocked() {
	if !st.ended {
		st.ended = true
		close(st.over)
	}
	st.detachLocked()
}

// attach makes c the stream's connection, in place of the one it had
// (that one is let go, and its response ends: clients reopen a stream
// they believe lost while the old one still looks open), and writes it
// the kept events numbered after from. A stream that has ended lets go of
// c at once (an empty stream still gets its headers).
func (st *stream) attach(c *sseConn, from uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.detachLocked()
	st.conn = c
	for _, ev := range st.events {
		if ev.no > from && st.conn != nil {
			st.writeLocked(ev, false)
		}
	}
	st.trimLocked()
	if st.ended && st.conn == c {
		if !c.started {
			c.writeHeader() // an empty stream, ended
		}
		st.detachLocked()
	}
}

// undelivered is the number of the last event a connection got: a new
// connection without Last-Event-ID gets what came after it.
func (st *stream) undelivered() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.delivered
}

// start sends c's headers, if no event has yet, once the session has taken
// the request.
func (st *stream) start(c *sseConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn == c && !c.started {
		if c.writeHeader() != nil {
			st.detachLocked()
		}
	}
}

// headerDelay is how long a POST's headers wait for its first event, so
// that a quick answer leaves with them, and with the end of the response,
// in one write.
var headerDelay = 5 * time.Millisecond

// startSoon sends c's headers after headerDelay if no event has by then.
func (st *stream) startSoon(c *sseConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn == c && !c.started {
		c.headerTimer = time.AfterFunc(headerDelay, func() { st.start(c) })
	}
}

// keepalive writes a comment line on c.
func (st *stream) keepalive(c *sseConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn != c || !c.started {
		return
	}
	if c.write([]byte(":\n\n")) != nil {
		st.detachLocked()
	}
}

// detach lets go of c if it is still the stream's connection.
func (st *stream) detach(c *sseConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn == c {
		st.detachLocked()
	}
}

// end: no more events; the connection, if any, is let go.
func (st *stream) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.endLocked()
}

// last is a copy of the newest event kept, nil when none.
func (st *stream) last() []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.events) == 0 {
		return nil
	}
	return bytes.Clone(st.events[len(st.events)-1].data)
}

func (st *stream) detachLocked() {
	if st.conn != nil {
		close(st.conn.done)
		st.conn = nil
	}
}

// writeLocked writes ev to the connection; the stream's final event is
// not flushed, so that it leaves with the end of the response, in one write
// when it fits the server's buffer.
func (st *stream) writeLocked(ev event, final bool) {
	if err := st.conn.writeEvent(eventID(st.no, ev.no), ev.data, !final); err != nil {
		st.detachLocked()
		return
	}
	st.delivered = max(st.delivered, ev.no)
}

// sseCopied is the longest data line that writeSSE copies into the
// event's encoding. A longer one is written from the frame itself, between
// the encoding before it and the encoding after it: a 10 MB answer is not
// copied again, into a fresh 10 MB buffer, on its way to the connection.
const sseCopied = 32 << 10

// writeSSE writes one SSE event carrying data to w; an empty id is left
// out. An event with no long line is one Write.
func writeSSE(w io.Writer, id string, data []byte) error {
	b := make([]byte, 0, min(eventSize(data), 2*sseCopied))
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	b = append(b, "event: message\n"...)
	for line := range bytes.Lines(data) {
		line = bytes.TrimRight(line, "\r\n")
		b = append(b, "data: "...)
		if len(line) <= sseCopied {
			b = append(append(b, line...), '\n')
			continue
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		b = append(b[:0], '\n')
	}
	_, err := w.Write(append(b, '\n'))
	return err
}

// writeHeader sends the response's headers now.
func (c *sseConn) writeHeader() error {
	c.setHeader()
	return c.rc.Flush()
}

// setHeader writes the headers, to go with what is written next.
func (c *sseConn) setHeader() {
	h := c.rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.rw.WriteHeader(http.StatusOK)
	c.started = true
	c.rc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
}

// write writes p and sends it now.
func (c *sseConn) write(p []byte) error {
	c.begin()
	if _, err := c.rw.Write(p); err != nil {
		return err
	}
	return c.rc.Flush()
}

// writeEvent writes the event of data named id, and sends it now when
// flush is set; else it goes with what follows it, or with the end of the
// response.
func (c *sseConn) writeEvent(id string, data []byte, flush bool) error {
	c.begin()
	if err := writeSSE(c.rw, id, data); err != nil {
		return err
	}
	if !flush {
		return nil
	}
	return c.rc.Flush()
}

// begin readies c for a write: the headers go with it if they have not
// gone yet, and the write gets its deadline.
func (c *sseConn) begin() {
	if !c.started {
		c.setHeader()
		if c.headerTimer != nil {
			c.headerTimer.Stop()
		}
	}
	c.rc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
}

// hold serves c until the stream lets go of it, or the request's context
// ends (the client left), with a keepalive comment now and then.
func (st *stream) hold(ctx context.Context, c *sseConn) {
	tick := time.NewTicker(sseKeepalive)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-ctx.Done():
			st.detach(c)
			return
		case <-tick.C:
			st.keepalive(c)
		}
	}
}
