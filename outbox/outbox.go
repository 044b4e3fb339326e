package outbox

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Frame is one message on its way out.
type Frame struct {
	Data []byte // one JSON-RPC message without its newline; nil: an end marker only
	Tag  uint64 // the tag of the inbound frame this one belongs to; 0: none
	Last bool   // the last frame for Tag: what came in under Tag is settled
	// Release, when set, gives Data's buffer back for reuse. A Writer
	// calls it once it holds no reference to Data any more (written to
	// the connection, or copied); a Writer that keeps Data (to replay it,
	// to pass it on) never calls it, and neither does a queue that drops
	// the frame: the buffer is then the garbage collector's, as any other.
	Release func()
}

// Writer is the connection a Queue writes to. The Queue never calls it
// from two goroutines at once: the writer goroutine and a Flush take turns.
type Writer interface {
	// WriteFrames writes frames in order, blocking as long as the
	// connection needs (within deadlines of the Writer's own). What a
	// partial TryWrite kept goes out first, even when frames is empty.
	WriteFrames(frames []Frame) error
	// TryWrite writes frames only as far as the connection takes them
	// without blocking. It reports false when it wrote nothing (and keeps
	// nothing). When it wrote part, it reports more and keeps the rest:
	// the Queue then owes it a WriteFrames call, which sends that rest
	// first. A Writer that cannot write without blocking always reports
	// false.
	TryWrite(frames []Frame) (ok, more bool)
}

var (
	// ErrFull: the frame would take the queue past Config.Max.
	ErrFull = errors.New("outbox: queue full")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("outbox: closed")
)

// DefaultDirectMax is Config.DirectMax when it is zero.
const DefaultDirectMax = 64 << 10

// runMax bounds what the writer goroutine hands the Writer in one call
// (a single larger frame goes alone): a backlog then leaves the queue,
// and opens Room, as it is written rather than all at the end.
const runMax = 64 << 10

// spareMax bounds the batch slice a Queue keeps for reuse, in frames: an
// idle queue holds no more than this (a daemon holds thousands).
const spareMax = 128

// Config sets a Queue's bounds. Sizes are in bytes, Separator included.
type Config struct {
	// HighWater: while more than this is queued, Room is not ready, and
	// frames held with SendLater wake the writer (whoever was to flush
	// them, the queue must drain for Room to open).
	HighWater int
	// Max: a frame that would take the queue past it is refused with
	// ErrFull, unless the queue is empty: one frame is always taken,
	// however large (frames are bounded by a message limit elsewhere).
	// Must be positive.
	Max int
	// DirectMax is the most that Flush writes on its caller's goroutine;
	// more is left to the writer goroutine. Zero means DefaultDirectMax.
	DirectMax int
	// Separator is what the Writer adds to each frame with Data (1 for a
	// newline), counted in the queue's size.
	Separator int
	// Share, when set, counts the queue's bytes against a Budget shared
	// with other queues; Close leaves it.
	Share *Share
}

// Queue is a bounded queue of frames for one Writer. Its methods are safe
// for concurrent use; Run and Drain belong to the one writer goroutine.
type Queue struct {
	w      Writer
	cfg    Config
	wake   chan struct{}         // 1-buffered: frames (or a TryWrite's rest) wait for the writer goroutine
	noRoom atomic.Bool           // !roomOpen, for HasRoom, which readers ask before every read
	share  atomic.Pointer[Share] // the Budget's share, if any: set once (Config.Share, JoinBudget), under mu

	mu       sync.Mutex
	frames   []Frame       // waiting, in order
	spare    []Frame       // an emptied batch, kept for reuse
	bytes    int           // queued or being written
	written  int64         // bytes written so far
	writing  bool          // the writer goroutine or a Flush holds the Writer
	owed     bool          // a partial TryWrite left a rest: WriteFrames must follow
	last     bool          // Drain has begun: Flush leaves everything to it
	drainer  bool          // Drain waits for a Flush to end
	closed   bool          // Close was called
	room     chan struct{} // closed while bytes <= HighWater
	roomOpen bool          // room is closed; changed by openRoom and shutRoom only
	freed    chan struct{} // closed when bytes next leave the queue; nil until a SendLaterOr waits

	// Serve's writer, started on demand (see Serve); nil fail: Run's mode.
	fail    func(error)
	drained atomic.Bool // Drain has begun: it is woken (wake), no writer is started
	served  served
}

// New returns an empty queue for w.
func New(w Writer, cfg Config) *Queue {
	if cfg.Max <= 0 {
		panic("outbox: Config.Max must be positive")
	}
	if cfg.DirectMax == 0 {
		cfg.DirectMax = DefaultDirectMax
	}
	q := &Queue{w: w, cfg: cfg, wake: make(chan struct{}, 1), room: make(chan struct{}), roomOpen: true}
	q.share.Store(cfg.Share)
	close(q.room)
	return q
}

// Send queues f and wakes the writer goroutine. It never blocks. It
// returns ErrFull (f is not queued) or ErrClosed.
func (q *Queue) Send(f Frame) error {
	if _, err := q.add(f); err != nil {
		return err
	}
	q.notify()
	q.enforce()
	return nil
}

// enforce holds the shared budget, if any, after a frame was queued.
func (q *Queue) enforce() {
	if sh := q.share.Load(); sh != nil {
		sh.b.enforce()
	}
}

// SendLater queues f without waking the writer: f goes out with the next
// Send or Flush, or with whatever the writer is writing now when it ends.
// A producer that handles a run of input holds what it sends with
// SendLater and flushes once the run is handled. It never blocks.
func (q *Queue) SendLater(f Frame) error {
	over, err := q.add(f)
	if over {
		q.notify()
	}
	if err == nil {
		q.enforce()
	}
	return err
}

// SendLaterOr is SendLater for a producer that would rather wait than be
// refused: when f would take the queue past Max, it returns ErrFull with a
// channel that is closed as soon as queued bytes leave the queue (written,
// dropped or closed away), for the producer to try again then. The check
// and the queueing are one step under the queue's lock, so however many
// producers try at once, none takes the queue past Max. Frames held with
// SendLater go to the writer when the queue is full: they are what must
// drain.
func (q *Queue) SendLaterOr(f Frame) (freed <-chan struct{}, err error) {
	over, freed, err := q.addOr(f, true)
	if over || freed != nil {
		q.notify()
	}
	if err == nil {
		q.enforce()
	}
	return freed, err
}

// wakeFreed wakes the producers that SendLaterOr turned away; q.mu is held.
func (q *Queue) wakeFreed() {
	if q.freed != nil {
		close(q.freed)
		q.freed = nil
	}
}

// add queues f; over reports the queue above its high-water mark.
func (q *Queue) add(f Frame) (over bool, err error) {
	over, _, err = q.addOr(f, false)
	return over, err
}

// addOr is add; when the queue is full and wait is set, it also returns
// the channel release closes when bytes next leave the queue, made under
// the same lock as the check, so that no release comes between them.
func (q *Queue) addOr(f Frame, wait bool) (over bool, freed <-chan struct{}, err error) {
	n := q.size(f)
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return false, nil, ErrClosed
	case q.bytes > 0 && q.bytes+n > q.cfg.Max:
		if wait {
			if q.freed == nil {
				q.freed = make(chan struct{})
			}
			freed = q.freed
		}
		return false, freed, ErrFull
	}
	if q.frames == nil {
		q.frames, q.spare = q.spare, nil
	}
	q.frames = append(q.frames, f)
	q.bytes += n
	q.share.Load().add(n)
	over = q.bytes > q.cfg.HighWater
	if over && q.roomOpen {
		q.shutRoom()
	}
	return over, nil, nil
}

func (q *Queue) size(f Frame) int {
	if f.Data == nil {
		return 0
	}
	return len(f.Data) + q.cfg.Separator
}

// Flush sends what SendLater held. When the writer goroutine is idle and
// the queued frames are at most DirectMax, Flush writes them itself, in
// one TryWrite: they reach the connection with no goroutine handoff. What
// that write does not take, and everything in the other cases, is left to
// the writer goroutine, which Flush wakes. Flush never blocks.
func (q *Queue) Flush() {
	batch, n, direct := q.takeDirect()
	if !direct {
		return
	}
	ok, more := q.w.TryWrite(batch)
	q.endDirect(batch, n, ok, more)
}

// takeDirect takes the queued frames for Flush to write itself, or wakes
// the writer goroutine when Flush may not.
func (q *Queue) takeDirect() (batch []Frame, n int, direct bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case len(q.frames) == 0 || q.closed:
		return nil, 0, false
	case q.writing || q.owed || q.last || q.bytes > q.cfg.DirectMax:
		q.notify()
		return nil, 0, false
	}
	// Nothing is being written, so bytes are those of the frames taken.
	batch, n = q.frames, q.bytes
	q.frames, q.writing = nil, true
	return batch, n, true
}

// endDirect ends a Flush's turn: written frames leave the count, refused
// ones go back ahead of any queued meanwhile, and the writer goroutine is
// woken for whatever is left.
func (q *Queue) endDirect(batch []Frame, n int, ok, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.writing = false
	if ok {
		q.keepSpare(batch)
		q.release(n, true)
		q.owed = more
	} else if !q.closed {
		q.frames = append(batch, q.frames...)
	}
	if q.owed || len(q.frames) > 0 || q.drainer {
		q.notify()
	}
}

// Run is the writer goroutine's loop: it writes what is queued whenever it
// is woken, until stop is closed (it returns nil) or a write fails (it
// returns the Writer's error; what was being written is dropped).
func (q *Queue) Run(stop <-chan struct{}) error {
	for {
		select {
		case <-q.wake:
		case <-stop:
			return nil
		}
		if err := q.writeQueued(); err != nil {
			return err
		}
	}
}

// Drain writes, after Run has returned, what is still queued and what a
// partial TryWrite left, waiting first for a Flush in progress (which
// never blocks) to end; Flushes after it only queue. In Serve's mode it
// runs on the owner's goroutine and takes turns with a writer goroutine
// still writing (which no Flush starts again), and Stop and Wait follow
// it. It is the last flush
// of a connection whose peer has stopped sending but may still read; the
// owner bounds it by closing the connection.
func (q *Queue) Drain() error {
	q.drained.Store(true)
	for {
		batch, ok, busy := q.takeTurn(true)
		switch {
		case busy:
			<-q.wake // the Flush's end wakes us
		case !ok:
			return nil
		default:
			return q.write(batch)
		}
	}
}

// writeQueued is one turn of the writer goroutine.
func (q *Queue) writeQueued() error {
	batch, ok, _ := q.takeTurn(false)
	if !ok {
		return nil
	}
	return q.write(batch)
}

// write writes a batch taken by takeTurn in runs of up to runMax bytes,
// each leaving the count once written.
func (q *Queue) write(batch []Frame) error {
	// At least one call: an empty batch still sends a TryWrite's rest.
	rest := batch
	var err error
	for first := true; err == nil && (first || len(rest) > 0); first = false {
		k, n := q.run(rest)
		err = q.w.WriteFrames(rest[:k])
		clear(rest[:k])
		rest = rest[k:]
		q.released(n, err == nil)
	}
	q.endTurn(batch, rest)
	return err
}

// run measures the first run of batch: k frames, n bytes.
func (q *Queue) run(batch []Frame) (k, n int) {
	for k < len(batch) {
		m := q.size(batch[k])
		if k > 0 && n+m > runMax {
			break
		}
		n += m
		k++
	}
	return k, n
}

// takeTurn takes the queued frames for the writer goroutine. It reports
// busy while a Flush holds the Writer (the Flush's end wakes the writer
// goroutine if it leaves anything, or if drain asks), and not ok when there
// is nothing to write. drain is Drain's turn, the last one.
func (q *Queue) takeTurn(drain bool) (batch []Frame, ok, busy bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if drain {
		q.last = true
	}
	switch {
	case q.writing:
		// Drain waits for the holder's end to wake it; the writer
		// goroutine finding the turn taken must not unmark it.
		q.drainer = q.drainer || drain
		return nil, false, true
	case len(q.frames) == 0 && !q.owed:
		return nil, false, false
	}
	batch = q.frames
	q.frames, q.writing, q.owed = nil, true, false
	return batch, true, false
}

// endTurn ends the writer goroutine's turn. dropped is what a failed write
// left unwritten: it leaves the count. Frames queued meanwhile wake the
// writer again.
func (q *Queue) endTurn(batch, dropped []Frame) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.writing = false
	n := 0
	for _, f := range dropped {
		n += q.size(f)
	}
	q.release(n, false)
	q.keepSpare(batch)
	if len(q.frames) > 0 || q.drainer {
		q.notify()
	}
}

// released is release under q.mu.
func (q *Queue) released(n int, wrote bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.release(n, wrote)
}

// release takes n bytes that left the queue (wrote: they were written, not
// dropped) off the count, and opens Room when the count is back at the
// high-water mark. q.mu is held.
func (q *Queue) release(n int, wrote bool) {
	if wrote {
		q.written += int64(n)
	}
	if q.closed {
		return // Close dropped the count
	}
	q.bytes -= n
	q.share.Load().add(-n)
	if n > 0 {
		q.wakeFreed()
	}
	if q.bytes <= q.cfg.HighWater && !q.roomOpen {
		q.openRoom()
	}
}

// openRoom and shutRoom change whether there is room; q.mu is held.
func (q *Queue) openRoom() {
	close(q.room)
	q.roomOpen = true
	q.noRoom.Store(false)
}

func (q *Queue) shutRoom() {
	q.room, q.roomOpen = make(chan struct{}), false
	q.noRoom.Store(true)
}

// keepSpare keeps an emptied batch for reuse, unless it is large or one
// is kept already. q.mu is held.
func (q *Queue) keepSpare(batch []Frame) {
	clear(batch)
	if q.spare == nil && cap(batch) <= spareMax {
		q.spare = batch[:0]
	}
}

func (q *Queue) notify() {
	if q.fail != nil && !q.drained.Load() {
		q.spawn()
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Close makes the queue refuse frames (ErrClosed) and drops those waiting:
// Bytes reads 0 and Room is ready from now on. A write in progress goes
// on; its owner stops it by closing the connection.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	clear(q.frames)
	q.frames, q.bytes = nil, 0
	q.share.Load().leave()
	q.wakeFreed()
	if !q.roomOpen {
		q.openRoom()
	}
}

// JoinBudget counts the queue's bytes, those queued now and all to come,
// against b from now on (as Config.Share would have from the start), with
// evict called if the queue is chosen for eviction. Close leaves it. A
// closed queue does not join.
func (q *Queue) JoinBudget(b *Budget, evict func(queued int)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.share.Load() != nil {
		return
	}
	sh := b.Join(evict)
	sh.add(q.bytes)
	q.share.Store(sh)
}

// Room returns a channel that is closed while the queue holds at most
// HighWater bytes (and once it is closed). A producer's reader waits for
// it before it reads more input.
func (q *Queue) Room() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.room
}

// HasRoom reports whether Room is ready now, without taking the queue's
// lock.
func (q *Queue) HasRoom() bool { return !q.noRoom.Load() }

// Bytes is what is queued or being written, separators included.
func (q *Queue) Bytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// Written is the bytes written so far, separators included.
func (q *Queue) Written() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.written
}
