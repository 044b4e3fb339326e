package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// bridgeRun is one `mcpmux connect` the test talks to line by line, as an
// editor does: its stdin stays open until the test closes it.
type bridgeRun struct {
	tb      testing.TB
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  testutil.Buffer
	lines   chan *jsonrpc.Message // stdout, one message per line; closed at EOF
	eof     chan struct{}         // closed when stdout ended
	readErr error                 // why stdout ended, set before eof is closed
	cancel  context.CancelFunc
}

// startBridge starts `mcpmux connect` with args (env added to its
// environment). Its stdout is read as it comes; every line must be one
// valid JSON-RPC message.
func startBridge(tb testing.TB, env []string, args ...string) *bridgeRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*runTimeout)
	b := &bridgeRun{tb: tb, lines: make(chan *jsonrpc.Message, 1024), eof: make(chan struct{}), cancel: cancel}
	b.cmd = mcpmux(ctx, append([]string{"connect"}, args...)...)
	b.cmd.Env = append(b.cmd.Environ(), env...)
	var err error
	b.stdin, err = b.cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := b.cmd.StdoutPipe()
	require.NoError(tb, err)
	b.cmd.Stderr = &b.stderr
	require.NoError(tb, b.cmd.Start())
	go b.read(stdout) // owned by close, which waits for eof
	tb.Cleanup(func() { b.close() })
	return b
}

func (b *bridgeRun) read(stdout io.Reader) {
	defer close(b.eof)
	defer close(b.lines)
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && !bytes.HasSuffix(line, []byte("\n")) {
			b.readErr = fmt.Errorf("stdout ended in the middle of a line: %q", line)
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				b.readErr = err
			}
			return
		}
		m, perr := jsonrpc.Parse(bytes.TrimSuffix(line, []byte("\n")))
		if perr != nil {
			b.readErr = fmt.Errorf("stdout has a line that is not JSON-RPC: %q", line)
			return
		}
		b.lines <- m
	}
}

// send writes lines to connect's stdin.
func (b *bridgeRun) send(lines ...[]byte) {
	b.tb.Helper()
	for _, l := range lines {
		_, err := b.stdin.Write(append(l, '\n'))
		require.NoError(b.tb, err, "write to connect's stdin")
	}
}

// next returns the next message on stdout; it fails the test if stdout
// ends or nothing comes within ioTimeout.
func (b *bridgeRun) next() *jsonrpc.Message {
	b.tb.Helper()
	select {
	case m, ok := <-b.lines:
		if !ok {
			b.tb.Fatalf("connect's stdout ended (%v); stderr:\n%s", b.readErr, b.stderr.String())
		}
		return m
	case <-time.After(ioTimeout):
		b.tb.Fatalf("nothing on connect's stdout within %v; stderr:\n%s", ioTimeout, b.stderr.String())
		return nil
	}
}

// await reads stdout until the answer to id (raw JSON) and returns it
// with what came before it.
func (b *bridgeRun) await(id string) (*jsonrpc.Message, []*jsonrpc.Message) {
	b.tb.Helper()
	var before []*jsonrpc.Message
	for {
		m := b.next()
		if (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && string(m.ID) == id {
			return m, before
		}
		before = append(before, m)
	}
}

// closeStdin ends connect's stdin, reads its stdout to the end and waits
// for it to exit; it returns the messages read and the exit code.
func (b *bridgeRun) closeStdin() (rest []*jsonrpc.Message, code int) {
	b.tb.Helper()
	rest = b.drain()
	require.NoError(b.tb, b.readErr, "connect's stdout")
	err := b.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		b.tb.Fatalf("wait for connect: %v", err)
	}
	return rest, b.cmd.ProcessState.ExitCode()
}

// drain closes stdin and reads stdout to its end; a connect still running
// runTimeout later is killed.
func (b *bridgeRun) drain() []*jsonrpc.Message {
	b.stdin.Close()
	var rest []*jsonrpc.Message
	timeout := time.NewTimer(runTimeout)
	defer timeout.Stop()
	for {
		select {
		case m, ok := <-b.lines:
			if !ok {
				return rest
			}
			rest = append(rest, m)
		case <-timeout.C:
			b.tb.Errorf("connect did not exit within %v of its stdin closing; killing it", runTimeout)
			b.cmd.Process.Kill()
		}
	}
}

// close is the cleanup: stdout read to its end and the process waited for.
func (b *bridgeRun) close() {
	b.drain()
	b.cmd.Wait()
	b.cancel()
}

// methods are the methods of the notifications among msgs.
func methods(msgs []*jsonrpc.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Kind == jsonrpc.KindNotification {
			out = append(out, m.Method)
		}
	}
	return out
}
