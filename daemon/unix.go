package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
)

// unixOpts is how the daemon serves the connections to its Unix sockets.
type unixOpts struct {
	maxStreams int          // yamux streams per connection; 0: the socket package's default
	log        *slog.Logger // the daemon's
	// connLog is for what one connection can provoke again and again
	// (yamux's own lines, refusals): rate limited, shared by all of them.
	connLog *slog.Logger
	// firstByte closes a connection that sends nothing this long after it
	// connected; line closes a session that began a message and did not
	// finish it within this long. 0: no limit.
	firstByte, line time.Duration
}

// stream is a session's transport over conn, with the line timeout.
func (o *unixOpts) stream(conn net.Conn, maxBytes int) *session.Stream {
	st := session.NewStream(conn, maxBytes)
	st.SetLineTimeout(o.line)
	return st
}

// sessionEnded logs why a session of a Unix connection ended: at debug
// level, but for a stall, which the shared limiter lets through.
func (o *unixOpts) sessionEnded(name string, p session.Peer, err error) {
	if errors.Is(err, session.ErrStalledLine) {
		o.connLog.Warn("closed a session that stalled in the middle of a message", "server", name, "transport", p.Transport, "peer", p.Addr, "line_timeout", o.line)
		return
	}
	o.log.Debug("session ended", "server", name, "error", err)
}

// sniff is socket.Sniff within the first-byte timeout; a connection that
// stays silent past it is logged (through the limiter) and closed.
func (o *unixOpts) sniff(ctx context.Context, c net.Conn, name string, peer session.Peer) (byte, net.Conn, bool) {
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if o.firstByte > 0 {
		sctx, cancel = context.WithTimeout(ctx, o.firstByte)
	}
	defer cancel()
	first, conn, err := socket.Sniff(sctx, c)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && socket.Waiting(c) {
		// The first byte came as the timer fired: a slow client (on a
		// starved machine), not a silent one. Closing now would lose it.
		c.SetReadDeadline(time.Time{})
		first, conn, err = socket.Sniff(ctx, c)
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			o.connLog.Warn("closed a connection that sent nothing within first_byte_timeout", "server", name, "peer", peer.Addr, "first_byte_timeout", o.firstByte)
		}
		c.Close() // gone before its first byte (a probe, a shutdown), or silent
		return 0, nil, false
	}
	return first, conn, true
}

// servable is what a socket serves sessions of: a server's router
// (mux.Server) or an endpoint.
type servable interface {
	Name() string
	Serve(ctx context.Context, t session.Transport, peer session.Peer) error
	MaxMessageBytes() int
}

// serveUnix serves one connection to a server's socket: newline-delimited
// JSON-RPC, one session; or, when its first byte is 0x00, yamux, each
// stream one session.
func serveUnix(ctx context.Context, hub servable, c net.Conn, o *unixOpts) {
	peer := unixPeer(c)
	first, conn, ok := o.sniff(ctx, c, hub.Name(), peer)
	if !ok {
		return
	}
	if first == socket.YamuxPreface {
		o.serveYamux(ctx, hub, conn, peer)
		return
	}
	// The yamux path's locals live in serveYamux: an idle session parks
	// under this frame, which is kept small (see mux.Hub.Serve).
	if err := hub.Serve(ctx, o.stream(conn, hub.MaxMessageBytes()), peer); err != nil {
		o.sessionEnded(hub.Name(), peer, err)
	}
}

// serveYamux serves a yamux connection: each stream one session.
func (o *unixOpts) serveYamux(ctx context.Context, hub servable, conn net.Conn, peer session.Peer) {
	maxBytes := hub.MaxMessageBytes()
	ylog := o.connLog.With("server", hub.Name(), "peer", peer.Addr)
	ylog.Debug("yamux connection")
	err := socket.ServeYamux(ctx, conn, socket.YamuxConfig{MaxStreams: o.maxStreams, Logger: ylog},
		func(ctx context.Context, stream net.Conn, id uint32) {
			p := session.Peer{Transport: "yamux", Addr: fmt.Sprintf("%s stream %d", peer.Addr, id), Dir: peer.Dir}
			if err := hub.Serve(ctx, o.stream(stream, maxBytes), p); err != nil {
				o.sessionEnded(hub.Name(), p, err)
			}
		})
	switch {
	case errors.Is(err, socket.ErrControlFlood):
		ylog.Warn("closed a yamux connection that flooded control frames (pings, window updates)")
	case err != nil:
		ylog.Warn("closed a yamux connection that broke the framing", "error", err)
	}
}

// unixPeer names the process at the other end of a Unix connection.
func unixPeer(c net.Conn) session.Peer {
	p, err := socket.PeerOf(c)
	if err != nil {
		return session.Peer{Transport: "unix"}
	}
	dir, _ := socket.ProcessDir(p.PID) // unknown where the system does not say
	return session.Peer{Transport: "unix", Addr: fmt.Sprintf("pid %d uid %d", p.PID, p.UID), Dir: dir}
}
