package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/mcpmux/mcpmux/mux"
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
}

// serveUnix serves one connection to a server's socket: newline-delimited
// JSON-RPC, one session; or, when its first byte is 0x00, yamux, each
// stream one session.
func serveUnix(ctx context.Context, hub mux.Server, c net.Conn, o unixOpts) {
	log := o.log
	peer := unixPeer(c)
	first, conn, err := socket.Sniff(ctx, c)
	if err != nil {
		c.Close() // gone before its first byte (a probe, a shutdown)
		return
	}
	maxBytes := hub.MaxMessageBytes()
	if first != socket.YamuxPreface {
		if err := hub.Serve(ctx, session.NewStream(conn, maxBytes), peer); err != nil {
			log.Debug("session ended", "server", hub.Name(), "error", err)
		}
		return
	}
	ylog := o.connLog.With("server", hub.Name(), "peer", peer.Addr)
	ylog.Debug("yamux connection")
	err = socket.ServeYamux(ctx, conn, socket.YamuxConfig{MaxStreams: o.maxStreams, Logger: ylog},
		func(ctx context.Context, stream net.Conn, id uint32) {
			p := session.Peer{Transport: "yamux", Addr: fmt.Sprintf("%s stream %d", peer.Addr, id), Dir: peer.Dir}
			if err := hub.Serve(ctx, session.NewStream(stream, maxBytes), p); err != nil {
				log.Debug("session ended", "server", hub.Name(), "error", err)
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
