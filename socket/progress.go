package socket

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// ErrPeerStalled: a yamux peer took no byte of what mcpmux had for it, or
// sent no byte at all (not even a keepalive's answer), for a whole
// YamuxConfig.StallTimeout. Its connection was closed.
var ErrPeerStalled = errors.New("socket: yamux peer made no progress")

// DefaultYamuxStall is YamuxConfig.StallTimeout's default.
const DefaultYamuxStall = 30 * time.Second

// yamuxKeepAlive is how often a yamux connection is pinged: a live peer
// then sends something at least this often, even when idle.
const yamuxKeepAlive = 30 * time.Second

// noLibraryTimeout stands for "never" in the yamux library's
// ConnectionWriteTimeout, which counts the time a frame waits in the
// library's send queue as well as its write, and the wait for a pong:
// on a starved machine both are long for a peer that is alive. Whether a
// peer is dead is decided by progress instead (progressConn).
const noLibraryTimeout = 365 * 24 * time.Hour

// YamuxLibraryConfig is the yamux library's configuration for either end
// of an mcpmux yamux connection: its own timeouts never end a connection,
// so that a slow peer is not taken for a dead one. Wrap the connection with
// ProgressConn, which ends it once the peer makes no progress.
func YamuxLibraryConfig() *yamux.Config {
	yc := yamux.DefaultConfig()
	yc.ConnectionWriteTimeout = noLibraryTimeout
	yc.KeepAliveInterval = yamuxKeepAlive
	yc.LogOutput = nil
	return yc
}

// DialYamux makes c the client end of a yamux connection with
// YamuxLibraryConfig, its writes cut off only when the server takes no
// byte for stall (DefaultYamuxStall when zero).
func DialYamux(c net.Conn, stall time.Duration) (*yamux.Session, error) {
	yc := YamuxLibraryConfig()
	yc.LogOutput = discard{}
	return yamux.Client(ProgressConn(c, stall), yc)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// ProgressConn wraps c so that a write fails only when the peer takes no
// byte of it for stall (DefaultYamuxStall when zero): each write gets a
// deadline, and one that times out having moved some bytes gets a fresh one
// for the rest. A stall is thus noticed between one and two stall timeouts
// after the last byte taken, however slowly the bytes before it went. It
// also notes when the last byte was read (quiet).
func ProgressConn(c net.Conn, stall time.Duration) net.Conn {
	if stall <= 0 {
		stall = DefaultYamuxStall
	}
	pc := &progressConn{Conn: c, stall: stall, start: time.Now()}
	return pc
}

// progressConn is ProgressConn's conn.
type progressConn struct {
	net.Conn
	stall    time.Duration
	start    time.Time    // monotonic origin of lastRead
	lastRead atomic.Int64 // when a byte was last read, since start
}

// Write implements net.Conn; only the yamux library's send loop calls it.
func (c *progressConn) Write(p []byte) (int, error) {
	n := 0
	for {
		c.Conn.SetWriteDeadline(time.Now().Add(c.stall))
		m, err := c.Conn.Write(p[n:])
		n += m
		switch {
		case err == nil:
			return n, nil
		case !isTimeout(err):
			return n, err
		case m == 0:
			return n, ErrPeerStalled
		}
	}
}

// Read implements net.Conn; only the yamux library's receive loop calls it.
func (c *progressConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(int64(time.Since(c.start)))
	}
	return n, err
}

// quiet is how long ago the peer last sent a byte.
func (c *progressConn) quiet() time.Duration {
	return time.Since(c.start) - time.Duration(c.lastRead.Load())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// quietWatch decides when a peer has been quiet too long. It counts only
// time it could see, as the session package's pongWatch does: between two
// of its ticks no more than twice the step, so that a pause of the daemon
// (a starved or suspended machine) is never taken for the peer's silence.
type quietWatch struct {
	max, step time.Duration
	last      time.Time     // the previous tick
	quiet     time.Duration // the peer's quiet time at the previous tick
	counted   time.Duration // time counted since the peer's last byte
}

// tick is a tick at now, with how long the peer has been quiet; it reports
// whether the peer is to be taken for dead.
func (w *quietWatch) tick(now time.Time, quiet time.Duration) bool {
	gap := now.Sub(w.last)
	w.last = now
	if quiet < w.quiet || quiet < gap {
		w.counted = 0 // a byte came since the previous tick
	}
	w.quiet = quiet
	w.counted += min(gap, 2*w.step, quiet)
	return w.counted > w.max
}
