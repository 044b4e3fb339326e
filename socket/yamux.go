//go:build unix

package socket

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"
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

// sniffedConn is a connection whose first byte was read already.
type sniffedConn struct {
	net.Conn
	mu    sync.Mutex
	first []byte // not yet returned by Read
}

func (c *sniffedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.first) > 0 && len(p) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// YamuxConfig configures ServeYamux.
// DefaultMaxStreams is the streams one yamux connection may have open at
// once when YamuxConfig.MaxStreams is zero.
const DefaultMaxStreams = 256

type YamuxConfig struct {
	// MaxStreams is how many streams may be open at once on one connection;
	// a stream over it is closed at once (and logged). 0 means 256.
	MaxStreams int
	// Logger receives refusals and yamux's own log, at Warn. nil discards.
	Logger *slog.Logger
}

// ServeYamux runs a yamux session on c, whose first byte is YamuxPreface
// (mcpmux is the yamux server), and calls handle for each stream the client
// opens, each in its own goroutine, with the stream's id. It returns when
// the client hangs up (nil), ctx is done (nil), or the yamux framing breaks
// (the error); in every case c is closed and every handler has returned.
// A handler owns its stream and must close it.
func ServeYamux(ctx context.Context, c net.Conn, cfg YamuxConfig, handle func(ctx context.Context, stream net.Conn, id uint32)) error {
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	yc := yamux.DefaultConfig()
	yc.AcceptBacklog = cfg.MaxStreams
	yc.LogOutput = nil
	yc.Logger = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	sess, err := yamux.Server(c, yc)
	if err != nil {
		c.Close()
		return err
	}
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()

	var handlers sync.WaitGroup
	var open atomic.Int64
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			sess.Close()
			handlers.Wait()
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

// isHangup reports whether a yamux session ended because the client went
// away rather than because it broke the framing.
func isHangup(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, yamux.ErrSessionShutdown) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
