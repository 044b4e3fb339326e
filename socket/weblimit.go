package socket

import (
	"bytes"
	"container/list"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/internal/rawio"
)

// firstByteTimeout bounds the wait for the first byte of a request on an
// unchecked connection. The header deadline (WebConfig.HeaderTimeout)
// counts from that byte, not from the accept: a client that connected on
// a starved machine and sends its request late is slow, not hostile (one
// that sends nothing only holds a place in the unchecked budget, from
// which the oldest goes first).
const firstByteTimeout = time.Minute

// limitListener bounds the web listener's connections in two pools.
//
// A connection starts unchecked: no request on it has passed the Host,
// Origin and token checks yet. At most budget of those are open at once;
// when one more arrives, the oldest unchecked connection is closed, so a
// peer without the token that opens thousands and trickles its headers
// holds no more than budget of the daemon's descriptors, and never a slot
// of a checked connection. The oldest whose request's headers have not
// all come is closed: a client whose whole request is there, read or
// waiting in the kernel, is about to be checked, and is passed over. When
// every one is such a client (many connecting at once), none is closed,
// up to twice the budget; past that the oldest of all is.
//
// A connection whose request passed the checks is checked (promote) until
// it closes. At most max of those are open at once: while max are, Accept
// waits for one to close before it takes the next from the kernel.
type limitListener struct {
	net.Listener
	max, budget int
	evicted     func(c net.Conn) // told of each unchecked connection closed for a newer one
	room        chan struct{}    // a token when a checked connection closed
	done        chan struct{}
	closeOnce   sync.Once

	mu        sync.Mutex
	checked   int
	unchecked list.List // of *limitedConn, oldest first
	peekBuf   [8 << 10]byte
}

func newLimitListener(l net.Listener, maxChecked, budget int, evicted func(net.Conn)) *limitListener {
	return &limitListener{Listener: l, max: maxChecked, budget: max(budget, 1), evicted: evicted,
		room: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *limitListener) Accept() (net.Conn, error) {
	if err := l.waitRoom(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	// Connections checked while this Accept waited in the kernel may have
	// filled the pool: this one is served once there is room.
	if err := l.waitRoom(); err != nil {
		c.Close()
		return nil, err
	}
	lc := &limitedConn{Conn: c, l: l, r: rawio.NewReader(c), w: rawio.NewWriter(c)}
	lc.watch.Store(true)
	if pool := l.admit(lc); pool != nil {
		if oldest := l.evict(l.evictable(pool)); oldest != nil {
			oldest.Conn.Close() // its server goroutine's read fails; its Close then has nothing to release
			if l.evicted != nil {
				l.evicted(oldest)
			}
		}
	}
	return lc, nil
}

// admit adds lc to the unchecked pool. When the pool was full already, it
// returns the connections that were in it, oldest first, for Accept to
// choose the one to close.
func (l *limitListener) admit(lc *limitedConn) []*limitedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var pool []*limitedConn
	if l.unchecked.Len() >= l.budget {
		pool = make([]*limitedConn, 0, l.unchecked.Len())
		for e := l.unchecked.Front(); e != nil; e = e.Next() {
			pool = append(pool, e.Value.(*limitedConn))
		}
	}
	lc.elem = l.unchecked.PushBack(lc)
	return pool
}

// evictable is the connection of pool (the unchecked ones, oldest first) to
// close for a new one: the oldest whose request's headers are not all
// there; else none, or the oldest at twice the budget. It peeks at the
// connections' input, so it runs without the lock; only Accept's goroutine
// calls it, the one user of l.peekBuf.
func (l *limitListener) evictable(pool []*limitedConn) *limitedConn {
	for _, c := range pool {
		if !c.headersIn(l.peekBuf[:]) {
			return c
		}
	}
	if len(pool) < 2*l.budget {
		return nil
	}
	return pool[0]
}

// evict takes c out of the unchecked pool to be closed; nil when c is nil,
// or was checked or closed since it was chosen.
func (l *limitListener) evict(c *limitedConn) *limitedConn {
	if c == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.state != connUnchecked || c.elem == nil {
		return nil
	}
	l.unchecked.Remove(c.elem)
	c.elem, c.state = nil, connEvicted
	return c
}

// waitRoom waits until fewer than max checked connections are open;
// net.ErrClosed once the listener is closed.
func (l *limitListener) waitRoom() error {
	for l.full() {
		select {
		case <-l.room:
		case <-l.done:
			return net.ErrClosed
		}
	}
	return nil
}

// full reports whether max checked connections are open.
func (l *limitListener) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked >= l.max
}

// Close implements net.Listener; an Accept waiting for room returns.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// counts reports the checked and unchecked connections open.
func (l *limitListener) counts() (checked, unchecked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checked, l.unchecked.Len()
}

// States of a limitedConn.
const (
	connUnchecked = iota
	connChecked
	connEvicted // closed by the listener for a newer unchecked one
	connClosed
)

// limitedConn is a connection of a limitListener, in one of its pools.
type limitedConn struct {
	net.Conn
	l *limitListener
	r io.Reader // Conn, read raw when it can be (rawio.NewReader)
	w io.Writer // Conn, written raw when it can be

	// Under l.mu.
	state int
	elem  *list.Element // in l.unchecked while unchecked

	// What was read of the request being received, while unchecked.
	hmu      sync.Mutex
	complete bool    // its headers ended
	tail     [3]byte // the last bytes read before, for an end split across reads
	tailLen  int
	watch    atomic.Bool   // unchecked: reads are watched for the headers' end
	begun    bool          // a byte of the request has been read
	pending  time.Duration // the header deadline asked before its first byte, to count from it

	window atomic.Int64 // the write deadline last set, as a duration from when it was set; 0: none
}

// Read implements net.Conn, noting when a request's headers have all been
// read while the connection is unchecked.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 && c.watch.Load() {
		c.note(p[:n])
	}
	return n, err
}

// note looks for the end of the request's headers in data, just read.
func (c *limitedConn) note(data []byte) {
	if d := c.noteHeaders(data); d > 0 {
		c.Conn.SetReadDeadline(time.Now().Add(d))
	}
}

// noteHeaders is note under c.hmu; it returns the header deadline that was
// put off until the request's first byte, now to be set.
func (c *limitedConn) noteHeaders(data []byte) (putOff time.Duration) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if !c.begun {
		c.begun, putOff, c.pending = true, c.pending, 0
	}
	if !c.complete {
		c.complete = headersEnd(c.tail[:c.tailLen], data)
		c.tailLen = copy(c.tail[:], lastBytes(c.tail[:c.tailLen], data, len(c.tail)))
	}
	return putOff
}

// seen reports whether the request's headers have all been read, and
// else the last bytes read.
func (c *limitedConn) seen() (complete bool, tail []byte) {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return c.complete, append([]byte(nil), c.tail[:c.tailLen]...)
}

// headersIn reports whether the headers of the request being received
// have all come: read already, or waiting in the kernel (peeked into buf).
func (c *limitedConn) headersIn(buf []byte) bool {
	complete, tail := c.seen()
	if complete {
		return true
	}
	if n := peekInput(c.Conn, buf); n > 0 && headersEnd(tail, buf[:n]) {
		return true
	}
	complete, _ = c.seen() // read meanwhile
	return complete
}

// refused puts a connection whose request was refused back among those
// whose next request has not come, so it is closed first again.
func (c *limitedConn) refused() {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	c.complete, c.tailLen, c.begun, c.pending = false, 0, false, 0
}

// Write implements net.Conn. A write deadline (every HTTP stream and
// WebSocket write sets one) ends a write only when the client took no
// byte of it for the whole of it: a write that timed out having moved
// some bytes gets the same time again for the rest. So a live client that
// reads slowly, on a starved machine, gets its answer late rather than a
// cut connection, and one that stopped reading is cut off between one and
// two deadlines after its last byte taken.
func (c *limitedConn) Write(p []byte) (int, error) {
	n := 0
	for {
		m, err := c.w.Write(p[n:])
		n += m
		d := time.Duration(c.window.Load())
		if err == nil || m == 0 || d <= 0 || !isTimeout(err) {
			return n, err
		}
		c.Conn.SetWriteDeadline(time.Now().Add(d))
	}
}

// SetWriteDeadline implements net.Conn, noting the time it gives for Write.
func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	c.noteWindow(t)
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline implements net.Conn, noting the write time for Write.
func (c *limitedConn) SetDeadline(t time.Time) error {
	c.noteWindow(t)
	return c.Conn.SetDeadline(t)
}

func (c *limitedConn) noteWindow(t time.Time) {
	if t.IsZero() {
		c.window.Store(0)
	} else {
		c.window.Store(int64(max(time.Until(t), time.Millisecond)))
	}
}

// SetReadDeadline implements net.Conn. On an unchecked connection no byte
// of whose request has come yet, the deadline the server sets for the
// request's headers is put off until that byte comes (note), and counts
// from it; meanwhile the wait is bounded by firstByteTimeout.
func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && c.watch.Load() && c.putOff(t) {
		return c.Conn.SetReadDeadline(time.Now().Add(firstByteTimeout))
	}
	return c.Conn.SetReadDeadline(t)
}

// putOff records deadline t to count from the request's first byte, and
// reports true, when no byte of it has come yet.
func (c *limitedConn) putOff(t time.Time) bool {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.begun {
		c.pending = 0
		return false
	}
	c.pending = max(time.Until(t), time.Millisecond)
	return true
}

// headersEnd reports whether a header block's end (a blank line) is in
// data, read after tail.
func headersEnd(tail, data []byte) bool {
	for _, end := range [][]byte{[]byte("\r\n\r\n"), []byte("\n\n")} {
		if bytes.Contains(data, end) {
			return true
		}
		// An end split between tail and data.
		for k := 1; k < len(end); k++ {
			if bytes.HasSuffix(tail, end[:k]) && bytes.HasPrefix(data, end[k:]) {
				return true
			}
		}
	}
	return false
}

// lastBytes is the last n bytes of tail followed by data.
func lastBytes(tail, data []byte, n int) []byte {
	if len(data) >= n {
		return data[len(data)-n:]
	}
	b := append(append([]byte(nil), tail...), data...)
	return b[max(len(b)-n, 0):]
}

// promote moves the connection to the checked pool, once a request on it
// passed the checks; nothing when it is checked already, or closed.
func (c *limitedConn) promote() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.state != connUnchecked {
		return
	}
	c.l.unchecked.Remove(c.elem)
	c.elem, c.state = nil, connChecked
	c.l.checked++
	c.watch.Store(false)
}

// Close closes the connection and gives its place back, once.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	switch c.state {
	case connUnchecked:
		c.l.unchecked.Remove(c.elem)
		c.elem = nil
	case connChecked:
		c.l.checked--
		select {
		case c.l.room <- struct{}{}:
		default: // Accept has been told already; it counts again
		}
	}
	c.state = connClosed
	return err
}

// SyscallConn passes the connection's own through: the WebSocket writer
// writes to the socket directly when it can.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("socket: the connection has no descriptor")
}
