//go:build unix

package socket

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/mcpmux/mcpmux/internal/ratelog"
)

// YamuxPreface is the first byte of a connection that speaks yamux: the
// version byte of yamux's first frame header. A JSON-RPC client's first byte
// is never 0x00.
const YamuxPreface byte = 0x00

// Sniff reads the first byte of c without losing it, and returns the conn
// to use from then on. A Unix socket connection is only peeked at
// (MSG_PEEK), so it is returned as it is, still a *net.UnixConn; any other
// conn is wrapped so that its first Read yields that byte again. Sniff
// gives up when ctx is done. An error (io.EOF when the peer left without
// sending a byte) leaves c to the caller to close.
func Sniff(ctx context.Context, c net.Conn) (first byte, conn net.Conn, err error) {
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() { // ctx ended: the read was cut short, or c is of no more use
			first, conn, err = 0, nil, context.Cause(ctx)
		}
	}()
	if sc, ok := c.(syscall.Conn); ok {
		first, err := peek(sc)
		return first, c, err
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, nil, err
	}
	return b[0], &sniffedConn{Conn: c, first: b[:]}, nil
}

// peek reads the first byte waiting on a socket and leaves it there.
func peek(sc syscall.Conn) (byte, error) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var b [1]byte
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n == 0:
		return 0, io.EOF
	}
	return b[0], nil
}

// Waiting reports whether a byte is waiting to be read on c, a socket,
// without reading it or waiting, whatever c's read deadline (false for a
// conn that is not a socket). A caller whose wait for a first byte timed
// out asks it before it closes c: a byte that came as the timer fired is a
// slow client's, not a silent one's.
func Waiting(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, _ = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	return n > 0
}

// sniffedConn is a connection whose first byte was read already.
type sniffedConn struct {
	net.Conn
	mu    sync.Mutex
	first []byte // not yet returned by Read
}

func (c *sniffedConn) Read(p []byte) (int, error) {
	if n := c.takeFirst(p); n > 0 {
		return n, nil
	}
	return c.Conn.Read(p)
}

// takeFirst copies into p what is left of the sniffed bytes; 0 once they
// have all been read (or p is empty).
func (c *sniffedConn) takeFirst(p []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := copy(p, c.first)
	c.first = c.first[n:]
	return n
}

// DefaultMaxStreams is the streams one yamux connection may have open at
// once when YamuxConfig.MaxStreams is zero.
const DefaultMaxStreams = 256

// YamuxConfig configures ServeYamux.
type YamuxConfig struct {
	// MaxStreams is how many streams may be open at once on one connection;
	// a stream over it is closed at once (and logged). 0 means 256.
	MaxStreams int
	// ControlBurst and ControlRate bound the control frames of one
	// connection (pings, go-aways, window updates and data frames that
	// carry nothing): ControlBurst at once, ControlRate a second after
	// that. A connection that sends more is closed (ErrControlFlood). 0
	// means DefaultControlBurst and DefaultControlRate.
	ControlBurst, ControlRate int
	// StallTimeout: a client that takes no byte of what the daemon has for
	// it for this long, or sends no byte at all (not even the answer to a
	// keepalive ping) for this long beyond the ping interval, is dead, and
	// its connection is closed (ErrPeerStalled). A slow client is not: the
	// time counts from its last byte, and never the daemon's own pauses.
	// 0 means DefaultYamuxStall.
	StallTimeout time.Duration
	// PingInterval is how often the client is pinged, so that a live one
	// sends something however idle it is. 0 means 30 s.
	PingInterval time.Duration
	// Logger receives refusals and yamux's own log, at Warn; give every
	// connection one made from the same YamuxLogger, so that a flood is
	// one line and a count. nil discards.
	Logger *slog.Logger
}

// YamuxLogger returns a logger for YamuxConfig.Logger that limits what the
// yamux connections made from it log together (package ratelog, keyed by
// the kind of line: yamux's lines name a stream or a header after their
// text, which the key leaves out). Records below Info pass unlimited.
func YamuxLogger(log *slog.Logger) *slog.Logger {
	return slog.New(ratelog.New(log.Handler(), ratelog.Config{Key: yamuxLogKey}))
}

// yamuxLogKey is the kind of a yamux log line: its level and its text up
// to what it says of a particular frame, error or stream, which yamux puts
// after a colon ("[WARN] yamux: frame for missing stream: Vsn:0 ...").
func yamuxLogKey(r slog.Record) string {
	msg := r.Message
	if i := strings.Index(msg, "yamux: "); i >= 0 {
		rest := msg[i+len("yamux: "):]
		if j := strings.Index(rest, ":"); j >= 0 {
			msg = msg[:i+len("yamux: ")+j]
		}
	}
	return r.Level.String() + " " + msg
}

// ServeYamux runs a yamux session on c, whose first byte is YamuxPreface
// (mcpmux is the yamux server), and calls handle for each stream the client
// opens, each in its own goroutine, with the stream's id. It returns when
// the client hangs up (nil), ctx is done (nil), the client sent more control
// frames than cfg allows (ErrControlFlood), or the yamux framing breaks (the
// error); in every case c is closed and every handler has returned.
// A handler owns its stream and must close it.
func ServeYamux(ctx context.Context, c net.Conn, cfg YamuxConfig, handle func(ctx context.Context, stream net.Conn, id uint32)) error {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.ControlBurst <= 0 {
		cfg.ControlBurst = DefaultControlBurst
	}
	if cfg.ControlRate <= 0 {
		cfg.ControlRate = DefaultControlRate
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultYamuxStall
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = yamuxKeepAlive
	}
	yc := YamuxLibraryConfig()
	yc.KeepAliveInterval = cfg.PingInterval
	yc.AcceptBacklog = cfg.MaxStreams
	yc.Logger = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	guard := newControlGuard(c, cfg.ControlBurst, cfg.ControlRate)
	pc := ProgressConn(guard, cfg.StallTimeout).(*progressConn)
	sess, err := yamux.Server(pc, yc)
	if err != nil {
		c.Close()
		return err
	}
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()

	var handlers sync.WaitGroup
	var silent atomic.Bool
	handlers.Go(func() { watchPeer(sess, pc, cfg.PingInterval+cfg.StallTimeout, &silent, log) })
	var open atomic.Int64
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			sess.Close()
			handlers.Wait()
			switch {
			case guard.flooded.Load():
				return ErrControlFlood
			case silent.Load() || errors.Is(err, ErrPeerStalled):
				return ErrPeerStalled
			}
			if ctx.Err() != nil || isHangup(err) {
				return nil
			}
			return err
		}
		if open.Load() >= int64(cfg.MaxStreams) {
			log.Warn("refused a yamux stream: max_streams_per_conn reached", "stream", st.StreamID(), "max_streams", cfg.MaxStreams)
			st.Close()
			continue
		}
		open.Add(1)
		handlers.Go(func() {
			defer open.Add(-1)
			handle(ctx, st, st.StreamID())
		})
	}
}

// watchPeer closes sess once its peer has sent nothing for quietMax of the
// time it could see (quietWatch), and sets silent; it returns when sess is
// closed.
func watchPeer(sess *yamux.Session, pc *progressConn, quietMax time.Duration, silent *atomic.Bool, log *slog.Logger) {
	step := quietMax / 8
	tick := time.NewTicker(step)
	defer tick.Stop()
	w := quietWatch{max: quietMax, step: step, last: time.Now()}
	for {
		select {
		case <-sess.CloseChan():
			return
		case now := <-tick.C:
			if w.tick(now, pc.quiet()) {
				log.Warn("closed a yamux connection whose client sent nothing, not even an answer to a ping", "quiet_for", quietMax)
				silent.Store(true)
				sess.Close()
				return
			}
		}
	}
}

// isHangup reports whether a yamux session ended because the client went
// away rather than because it broke the framing.
func isHangup(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
