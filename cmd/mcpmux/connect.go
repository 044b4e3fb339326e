package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/socket"
)

// defaultReconnect is how long connect tries to reach a daemon again after
// losing its session, unless --reconnect says otherwise.
const defaultReconnect = time.Minute

func newConnectCmd() *cobra.Command {
	var drain, reconnect time.Duration
	var viaYamux, noAutostart bool
	cmd := &cobra.Command{
		Use:   "connect NAME",
		Short: "Bridge stdin/stdout to the shared server NAME (for clients that can only spawn a command)",
		Args:  cobra.ExactArgs(1),
	}
	find := daemonFlag(cmd)
	cmd.Flags().DurationVar(&drain, "drain", 5*time.Second, "after stdin closes, how long to wait for the answers still due")
	cmd.Flags().DurationVar(&reconnect, "reconnect", defaultReconnect, "after losing the daemon, how long to keep trying to reach one again (0: exit at once)")
	cmd.Flags().BoolVar(&viaYamux, "yamux", false, "speak yamux on the socket (first byte 0x00) and run the session on one stream")
	cmd.Flags().BoolVar(&noAutostart, "no-autostart", false, "do not start a daemon when none answers")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx, name := cmd.Context(), args[0]
		t, err := find(ctx, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if err := t.checkServer(name); err != nil {
			return err
		}
		d := dialer{find: find, name: name, autostart: !noAutostart, viaYamux: viaYamux}
		conn, path, err := d.dial(ctx, t)
		if err != nil {
			return err
		}
		b := &bridge{
			name:      name,
			drain:     drain,
			reconnect: reconnect,
			dial:      func(ctx context.Context) (net.Conn, string, error) { return d.dial(ctx, nil) },
			stderr:    cmd.ErrOrStderr(),
			out:       bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10),
		}
		return b.run(ctx, newLink(conn, path), cmd.InOrStdin())
	}
	return cmd
}

// dialer opens sessions on the socket of one server, finding its daemon
// each time anew (it may have moved, or gone and need starting).
type dialer struct {
	find      func(ctx context.Context, warn io.Writer) (*target, error)
	name      string
	autostart bool // --no-autostart not given
	viaYamux  bool
}

// dial opens a session on the server's socket. t is the daemon found
// already; nil finds it again, quietly (its warnings were given at the
// start).
func (d *dialer) dial(ctx context.Context, t *target) (net.Conn, string, error) {
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
		if err := reach(ctx, t, d.name, off); err != nil {
			return nil, path, err
		}
		conn, err = socket.Dial(ctx, path)
	}
	if errors.Is(err, socket.ErrUnsafeDir) || errors.Is(err, socket.ErrForeignPeer) {
		return nil, path, dirRefusal(err) // refused before a byte was sent: nothing to do with a daemon of ours
	}
	if err != nil {
		return nil, path, fmt.Errorf("no mcpmux daemon is serving %s: %w", path, unwrapSyscall(err))
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
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard // failures surface as errors of the stream
	sess, err := yamux.Client(conn, cfg)
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

func unwrapSyscall(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return se.Err
		}
		return op.Err
	}
	return err
}
