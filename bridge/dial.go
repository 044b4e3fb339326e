package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/socket"
)

// Config is one `mcpmux connect` session: the server, how to find its
// daemon and start one, and the client's side. The zero Drain and
// Reconnect mean no wait: at stdin's end the bridge hangs up at once, and
// a lost session ends it. Find, Status, StateDir and SameConfig are
// required.
type Config struct {
	Server string // the server to bridge to
	// Find finds the daemon of the config file anew: at the start, with
	// Stderr for its warnings, and before each reconnection, with nil
	// (they were given once), since the daemon may have moved or gone.
	Find func(ctx context.Context, warn io.Writer) (*Target, error)
	// Status asks the daemon serving in the socket folder dir what it
	// serves.
	Status func(ctx context.Context, dir string) (daemon.Status, error)
	// StateDir is the state folder, where an auto-started daemon logs.
	StateDir func() (string, error)
	// SameConfig reports whether two paths name the same config file.
	SameConfig func(a, b string) bool

	NoAutostart bool          // never start a daemon (--no-autostart)
	Yamux       bool          // speak yamux on the socket and run the session on one stream
	Drain       time.Duration // after stdin ends, how long to wait for the answers still due
	Reconnect   time.Duration // after losing the daemon, how long to try to reach one again

	Stdin  io.Reader // the client's lines
	Stdout io.Writer // the daemon's lines, for the client
	Stderr io.Writer // what the bridge has to say
}

// Run bridges cfg.Stdin and cfg.Stdout to a session of cfg.Server until
// stdin ends and the answers due are in (nil), ctx ends (nil), or the
// bridge gives up (its reason). It finds the daemon first, and starts
// one when none answers and auto-start is on.
func Run(ctx context.Context, cfg Config) error {
	t, err := cfg.Find(ctx, cfg.Stderr)
	if err != nil {
		return err
	}
	if err := t.checkServer(cfg.Server); err != nil {
		return err
	}
	d := dialer{
		find:       cfg.Find,
		status:     cfg.Status,
		stateDir:   cfg.StateDir,
		sameConfig: cfg.SameConfig,
		name:       cfg.Server,
		autostart:  !cfg.NoAutostart,
		viaYamux:   cfg.Yamux,
	}
	conn, path, err := d.dial(ctx, t)
	if err != nil {
		return err
	}
	b := &bridge{
		name:      cfg.Server,
		drain:     cfg.Drain,
		reconnect: cfg.Reconnect,
		dial:      func(ctx context.Context) (net.Conn, string, error) { return d.dial(ctx, nil) },
		stderr:    cfg.Stderr,
		out:       bufio.NewWriterSize(cfg.Stdout, 64<<10),
	}
	return b.run(ctx, newLink(conn, path), cfg.Stdin)
}

// dialer opens sessions on the socket of one server, finding its daemon
// each time anew (it may have moved, or gone and need starting).
type dialer struct {
	find       func(ctx context.Context, warn io.Writer) (*Target, error)
	status     func(ctx context.Context, dir string) (daemon.Status, error)
	stateDir   func() (string, error)
	sameConfig func(a, b string) bool
	name       string
	autostart  bool // --no-autostart not given
	viaYamux   bool
}

// dial opens a session on the server's socket. t is the daemon found
// already; nil finds it again, quietly (its warnings were given at the
// start).
func (d *dialer) dial(ctx context.Context, t *Target) (net.Conn, string, error) {
	if t == nil {
		var err error
		if t, err = d.find(ctx, nil); err != nil {
			return nil, "", err
		}
		if err := t.checkServer(d.name); err != nil {
			return nil, "", err
		}
	}
	path := t.socket(d.name)
	conn, err := socket.Dial(ctx, path)
	if err != nil && !errors.Is(err, socket.ErrUnsafeDir) && !errors.Is(err, socket.ErrForeignPeer) {
		// No daemon answers there yet: wait for one that is starting, or
		// start one, then try again.
		off := ""
		switch {
		case !d.autostart:
			off = "--no-autostart was given"
		case !t.autostart():
			off = "autostart = false in [daemon]"
		}
		if err := d.reach(ctx, t, off); err != nil {
			return nil, path, err
		}
		conn, err = socket.Dial(ctx, path)
	}
	if errors.Is(err, socket.ErrUnsafeDir) || errors.Is(err, socket.ErrForeignPeer) {
		return nil, path, socket.Refusal(err) // refused before a byte was sent: nothing to do with a daemon of ours
	}
	if err != nil {
		return nil, path, fmt.Errorf("no mcpmux daemon is serving %s: %w", path, socket.Cause(err))
	}
	if d.viaYamux {
		st, err := openYamuxStream(conn)
		if err != nil {
			conn.Close()
			return nil, path, fmt.Errorf("yamux on %s: %w", path, err)
		}
		conn = st
	}
	return conn, path, nil
}

// openYamuxStream makes conn the client side of a yamux session and opens
// one stream on it; closing the stream closes the session and conn.
func openYamuxStream(conn net.Conn) (net.Conn, error) {
	// Failures surface as errors of the stream; a slow daemon is not a
	// dead one (socket.DialYamux).
	sess, err := socket.DialYamux(conn, 0)
	if err != nil {
		return nil, err
	}
	st, err := sess.OpenStream()
	if err != nil {
		sess.Close()
		return nil, err
	}
	return yamuxStream{st, sess}, nil
}

// yamuxStream is the one stream of a yamux session the bridge opened.
type yamuxStream struct {
	*yamux.Stream
	sess *yamux.Session
}

func (s yamuxStream) Close() error {
	s.Stream.Close()
	return s.sess.Close()
}
