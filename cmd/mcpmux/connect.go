package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/socket"
)

func newConnectCmd() *cobra.Command {
	var drain time.Duration
	var viaYamux, noAutostart bool
	cmd := &cobra.Command{
		Use:   "connect NAME",
		Short: "Bridge stdin/stdout to the shared server NAME (for clients that can only spawn a command)",
		Args:  cobra.ExactArgs(1),
	}
	load := configFlag(cmd)
	cmd.Flags().DurationVar(&drain, "drain", 5*time.Second, "after stdin closes, how long to wait for the answers still due")
	cmd.Flags().BoolVar(&viaYamux, "yamux", false, "speak yamux on the socket (first byte 0x00) and run the session on one stream")
	cmd.Flags().BoolVar(&noAutostart, "no-autostart", false, "do not start a daemon when none answers")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := load()
		if err != nil {
			return err
		}
		path := filepath.Join(cfg.Listen.SocketDir, args[0]+".sock")
		if cfg.Daemon.Autostart && !noAutostart {
			if err := ensureDaemon(cmd.Context(), cfg, path); refusal(err) != nil {
				return refusal(err) // another user's folder or daemon: nothing to start
			} else if err != nil {
				return fmt.Errorf("no mcpmux daemon is serving %s, and starting one failed: %w", path, err)
			}
		} else if err := autostartOff(cmd.Context(), cfg, path, noAutostart); err != nil {
			return err
		}
		return bridge(cmd.Context(), path, viaYamux, drain, cmd.InOrStdin(), cmd.OutOrStdout())
	}
	return cmd
}

// bridgeLineLimit bounds the lines the bridge holds to learn their ids; a
// longer line is passed through in pieces, untracked.
const bridgeLineLimit = 64 << 20

// bridge copies stdin to the socket at path and the socket to stdout, line
// by line and byte for byte. On stdin EOF it waits, at most drain, for the
// answers to the requests it forwarded, then closes the socket. With
// viaYamux the session runs on one yamux stream of the connection.
func bridge(ctx context.Context, path string, viaYamux bool, drain time.Duration, stdin io.Reader, stdout io.Writer) error {
	conn, err := socket.Dial(ctx, path)
	if errors.Is(err, socket.ErrUnsafeDir) || errors.Is(err, socket.ErrForeignPeer) {
		return err // refused before a byte was sent: nothing to do with a daemon of ours
	}
	if err != nil {
		return fmt.Errorf("no mcpmux daemon is serving %s: %w", path, plainDialError(err))
	}
	uc := conn
	if viaYamux {
		if uc, err = openYamuxStream(conn); err != nil {
			conn.Close()
			return fmt.Errorf("yamux on %s: %w", path, err)
		}
	}
	defer uc.Close()

	var t tracker
	t.init()
	stdinDone := make(chan error, 1)
	socketDone := make(chan error, 1)
	// The stdin copier is deliberately not waited for: a read from a
	// blocking stdin cannot be interrupted, and a client may keep its end
	// open after the daemon dropped the session or a signal arrived. It ends
	// at stdin EOF or with the process, which exits once bridge returns.
	go func() { stdinDone <- copyLines(uc, stdin, true, t.sent) }()
	var wg sync.WaitGroup
	wg.Go(func() { socketDone <- copyLines(stdout, uc, false, t.answered) })
	defer wg.Wait()

	select {
	case err := <-socketDone:
		uc.Close()
		if err == nil {
			return fmt.Errorf("the daemon closed the session on %s", path)
		}
		return fmt.Errorf("session on %s: %w", path, err)
	case err := <-stdinDone:
		if err != nil {
			uc.Close()
			return fmt.Errorf("read stdin: %w", err)
		}
	case <-ctx.Done():
		uc.Close()
		return nil
	}

	// stdin is done: wait for what is still due, then hang up.
	timer := time.NewTimer(drain)
	defer timer.Stop()
	select {
	case <-t.idle():
	case <-timer.C:
	case <-ctx.Done():
	case err := <-socketDone:
		if !t.isIdle() {
			if err == nil {
				return fmt.Errorf("the daemon closed the session on %s with answers still due", path)
			}
			return fmt.Errorf("session on %s: %w", path, err)
		}
	}
	uc.Close()
	return nil
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

// copyLines copies newline-terminated lines from r to w unchanged, calling
// seen with each line short enough to hold. It returns nil at EOF; with
// terminate, a last line that lacks its newline gets one, so that
// `printf '{...}' | mcpmux connect NAME` is answered.
//
// Lines that arrive together leave together: output is buffered, and
// flushed whenever the next read may wait.
func copyLines(w io.Writer, r io.Reader, terminate bool, seen func([]byte)) (err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	defer func() {
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
	}()
	var line []byte
	held := true
	for {
		if !hasLine(br) {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		chunk, err := br.ReadSlice('\n')
		complete := err == nil || (errors.Is(err, io.EOF) && len(chunk) > 0)
		if held && len(chunk) > 0 {
			if len(line)+len(chunk) <= bridgeLineLimit {
				if len(line)+len(chunk) > cap(line) {
					// Double: append's growth of large slices would copy
					// a long line many times over.
					line = append(make([]byte, 0, max(2*cap(line), len(line)+len(chunk))), line...)
				}
				line = append(line, chunk...)
			} else {
				held, line = false, line[:0]
			}
		}
		// seen runs before the line's last bytes go out: the answer to a
		// request can come back, and be looked up, as soon as they have.
		if complete && held {
			seen(line)
		}
		if len(chunk) > 0 {
			if _, werr := bw.Write(chunk); werr != nil {
				return werr
			}
		}
		if complete {
			if err != nil && terminate {
				if werr := bw.WriteByte('\n'); werr != nil {
					return werr
				}
			}
			line, held = line[:0], true
			if cap(line) > 1<<20 {
				line = nil // do not keep a long line's buffer for good
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
			return nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// hasLine reports whether a whole line is buffered in br, so that the next
// ReadSlice returns without waiting.
func hasLine(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// tracker knows which requests the bridge forwarded are still unanswered.
type tracker struct {
	mu      sync.Mutex
	pending map[string]bool
	idleCh  chan struct{} // closed while nothing is pending
}

func (t *tracker) init() {
	t.pending = make(map[string]bool)
	t.idleCh = make(chan struct{})
	close(t.idleCh)
}

func (t *tracker) sent(line []byte) {
	for _, m := range messages(line) {
		if m.Kind == jsonrpc.KindNotification && m.Method == "notifications/cancelled" {
			// A cancelled request gets no answer: stop waiting for it.
			if span, ok := m.ParamsPath("requestId"); ok {
				t.settle(m.Frame[span.Start:span.End])
			}
		}
		if m.Kind == jsonrpc.KindRequest {
			t.mu.Lock()
			if len(t.pending) == 0 {
				t.idleCh = make(chan struct{})
			}
			t.pending[string(m.ID)] = true
			t.mu.Unlock()
		}
	}
}

func (t *tracker) answered(line []byte) {
	for _, m := range messages(line) {
		if m.Kind != jsonrpc.KindResult && m.Kind != jsonrpc.KindError {
			continue
		}
		t.settle(m.ID)
	}
}

func (t *tracker) settle(id []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending[string(id)] {
		delete(t.pending, string(id))
		if len(t.pending) == 0 {
			close(t.idleCh)
		}
	}
}

func (t *tracker) idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.idleCh
}

func (t *tracker) isIdle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending) == 0
}

// messages parses a line, or each element of a batch, ignoring what does
// not parse: the daemon answers that itself.
func messages(line []byte) []*jsonrpc.Message {
	if jsonrpc.IsBatch(line) {
		elems, err := jsonrpc.SplitBatch(line)
		if err != nil {
			return nil
		}
		var out []*jsonrpc.Message
		for _, el := range elems {
			if m, err := jsonrpc.Parse(el); err == nil {
				out = append(out, m)
			}
		}
		return out
	}
	m, err := jsonrpc.Parse(line)
	if err != nil {
		return nil
	}
	return []*jsonrpc.Message{m}
}
