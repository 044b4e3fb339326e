package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"printf","version":"1"}}}`

// parseLines splits a bridge's stdout into messages. Every byte must belong
// to a line, and every line must be one valid JSON-RPC message.
func parseLines(tb testing.TB, out string) []*jsonrpc.Message {
	tb.Helper()
	require.True(tb, out == "" || strings.HasSuffix(out, "\n"), "stdout must end with a newline: %q", out)
	var msgs []*jsonrpc.Message
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if out == "" {
			break
		}
		require.NotEmpty(tb, line, "line %d of stdout is empty", i+1)
		m, err := jsonrpc.Parse([]byte(line))
		require.NoError(tb, err, "line %d of stdout is not a JSON-RPC message: %q", i+1, line)
		msgs = append(msgs, m)
	}
	return msgs
}

// TestConnectPrintf is the one-liner from the README: printf two requests
// into `mcpmux connect` and get exactly their two answers.
func TestConnectPrintf(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	echo := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, printf"}}}`
	tests := []struct {
		name  string
		stdin string
	}{
		{"newline after the last line", initializeLine + "\n" + echo + "\n"},
		{"no newline after the last line", initializeLine + "\n" + echo},
		{"CRLF line endings", initializeLine + "\r\n" + echo + "\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runConnect(t, d.path, tt.stdin, "demo")
			require.Equal(t, 0, r.code, "exit code; stderr: %s", r.stderr)
			assert.Empty(t, r.stderr)
			msgs := parseLines(t, r.stdout)
			require.Len(t, msgs, 2, "stdout: %s", r.stdout)
			var ids []string
			for _, m := range msgs {
				assert.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
				ids = append(ids, string(m.ID))
			}
			slices.Sort(ids)
			assert.Equal(t, []string{"1", "2"}, ids)
			i := slices.IndexFunc(msgs, func(m *jsonrpc.Message) bool { return string(m.ID) == "2" })
			text, err := resultText(msgs[i])
			require.NoError(t, err)
			assert.Equal(t, "hello, printf", text)
		})
	}
}

// TestConnectStdoutIsProtocolOnly drives a busy session through the bridge
// while the daemon logs on purpose (debug level, and a server that writes a
// stderr line per request): not one byte of that may reach connect's stdout,
// and the daemon's own stdout stays empty (checked at cleanup).
func TestConnectStdoutIsProtocolOnly(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", []string{"--stderr-noise"}), "")
	lines := []string{
		initializeLine,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}
	wantIDs := []string{"1", "2"}
	for i := 3; i <= 8; i++ {
		lines = append(lines, string(toolCall(fmt.Sprint(i), "echo", map[string]string{"text": fmt.Sprintf("echo %d\nwith a newline in it", i)})))
		wantIDs = append(wantIDs, fmt.Sprint(i))
	}
	lines = append(lines,
		`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{"ms":300,"steps":3},"_meta":{"progressToken":"tok"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":`, // malformed: cut short
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"stderr","arguments":{"text":"a line for the daemon's log"}}}`,
	)
	wantIDs = append(wantIDs, `"slow"`, "null", "10")

	r := runConnect(t, d.path, strings.Join(lines, "\n")+"\n", "demo")
	require.Equal(t, 0, r.code, "exit code; stderr: %s", r.stderr)
	assert.Empty(t, r.stderr, "connect's stderr")

	msgs := parseLines(t, r.stdout)
	var ids []string
	progress := 0
	for _, m := range msgs {
		switch m.Kind {
		case jsonrpc.KindResult, jsonrpc.KindError:
			ids = append(ids, string(m.ID))
		case jsonrpc.KindNotification:
			if tok, ok := progressToken(m); ok {
				assert.Equal(t, `"tok"`, tok)
				progress++
			}
		}
	}
	slices.Sort(ids)
	slices.Sort(wantIDs)
	assert.Equal(t, wantIDs, ids, "one answer per request, and one error for the malformed line")
	assert.Equal(t, 3, progress, "progress notifications")

	// The log was busy meanwhile, which is the point of the test.
	log := d.log()
	assert.Contains(t, log, "a line for the daemon's log")
	assert.Contains(t, log, "request tools/call id")
	assert.Contains(t, log, "level=DEBUG")
	assert.Empty(t, d.stdout.String(), "the daemon's stdout")
}

// TestConnectNoDaemon: with nothing serving the socket (and auto-start
// turned off), connect fails at once with one line naming the socket, and
// writes nothing to stdout.
func TestConnectNoDaemon(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), "")
	args := []string{"demo"}
	if connectHasFlag(t, "--no-autostart") {
		args = append([]string{"--no-autostart"}, args...) // this test is about no daemon at all
	}
	r := runConnect(t, cfg.path, initializeLine+"\n", args...)
	assert.NotEqual(t, 0, r.code, "exit code")
	assert.Empty(t, r.stdout, "stdout")
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "stderr must be exactly one line: %q", r.stderr)
	assert.True(t, strings.HasSuffix(r.stderr, "\n"), "stderr must end with its newline: %q", r.stderr)
	assert.Contains(t, r.stderr, cfg.socket("demo"), "stderr must name the socket")
}

// TestConnectSessionEnds: a client such as an editor keeps connect's stdin
// open for as long as it lives, so the bridge must exit on its own when the
// session ends for good: the daemon going away with --reconnect 0
// (non-zero, one line naming the socket) or a SIGTERM to connect itself
// (exit 0, quietly). TestConnectReconnects has the bridge that stays.
func TestConnectSessionEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		end      func(d *daemon, connect *exec.Cmd)
		wantCode int
		wantErr  bool // one line on stderr naming the socket
	}{
		{"the daemon stops, --reconnect 0", []string{"--reconnect", "0"}, func(d *daemon, _ *exec.Cmd) { d.stop() }, 1, true},
		{"connect gets SIGTERM", nil, func(_ *daemon, c *exec.Cmd) { c.Process.Signal(syscall.SIGTERM) }, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startDaemon(t, demo("demo", nil), "")
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			cmd := mcpmux(ctx, append(append([]string{"connect", "--config", d.path}, tt.args...), "demo")...)
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			defer stdin.Close() // only after connect has exited
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())

			_, err = io.WriteString(stdin, initializeLine+"\n")
			require.NoError(t, err)
			out := bufio.NewReader(stdout)
			line, err := out.ReadBytes('\n')
			require.NoError(t, err, "the initialize answer")
			m, err := jsonrpc.Parse(bytes.TrimSuffix(line, []byte("\n")))
			require.NoError(t, err)
			require.Equal(t, "1", string(m.ID))

			start := time.Now()
			tt.end(d, cmd)
			rest, err := io.ReadAll(out)
			require.NoError(t, err)
			assert.Empty(t, string(rest), "stdout after the session ended")
			err = cmd.Wait()
			require.NoError(t, ctx.Err(), "connect did not exit while its stdin stayed open")
			t.Logf("connect exited %v after the session ended", time.Since(start).Round(time.Millisecond))
			assert.Equal(t, tt.wantCode, cmd.ProcessState.ExitCode(), "exit code (%v)", err)
			if tt.wantErr {
				assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "exactly one line: %q", stderr.String())
				assert.Contains(t, stderr.String(), d.socket("demo"))
			} else {
				assert.Empty(t, stderr.String())
			}
		})
	}
}

// connectHasFlag reports whether `mcpmux connect --help` lists flag.
func connectHasFlag(tb testing.TB, flag string) bool {
	tb.Helper()
	out, err := mcpmux(context.Background(), "connect", "--help").CombinedOutput()
	require.NoError(tb, err, "mcpmux connect --help: %s", out)
	return bytes.Contains(out, []byte(flag))
}

// TestConnectDrain: at stdin EOF the bridge waits for the answers still due,
// but no longer than --drain; a request it gives up on is cancelled upstream
// when it hangs up, and the bridge exits non-zero, saying so.
func TestConnectDrain(t *testing.T) {
	d := startDaemon(t, demo("demo", nil), "")
	slow := func(ms int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"ms":%d}}}`, ms)
	}

	t.Run("waits for the answer", func(t *testing.T) {
		r := runConnect(t, d.path, initializeLine+"\n"+slow(800)+"\n", "demo")
		require.Equal(t, 0, r.code, "exit code; stderr: %s", r.stderr)
		msgs := parseLines(t, r.stdout)
		require.Len(t, msgs, 2, "stdout: %s", r.stdout)
		assert.Equal(t, "2", string(msgs[1].ID))
		text, err := resultText(msgs[1])
		require.NoError(t, err)
		assert.Equal(t, "waited 800 ms", text)
		assert.GreaterOrEqual(t, r.elapsed, 800*time.Millisecond)
		t.Logf("connect exited after %v", r.elapsed.Round(time.Millisecond))
	})

	t.Run("no wait once every answer is in", func(t *testing.T) {
		// The bridge must know a request is pending before its answer can
		// come back; if it learns it late, it waits out the whole drain.
		// The race is narrow, so the bridge runs a number of times.
		pings := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":"2","method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":3,"method":"ping"}`
		var slowest time.Duration
		for i := range 20 {
			r := runConnect(t, d.path, pings, "--drain", "20s", "demo")
			require.Equal(t, 0, r.code, "exit code; stderr: %s", r.stderr)
			require.Len(t, parseLines(t, r.stdout), 3)
			require.Less(t, r.elapsed, 10*time.Second, "run %d waited for answers it already had", i)
			slowest = max(slowest, r.elapsed)
		}
		t.Logf("slowest of 20 runs: %v", slowest.Round(time.Millisecond))
	})

	t.Run("gives up after --drain and the daemon cancels", func(t *testing.T) {
		stats := open(t, d.socket("demo"))
		before := stats.mustStats(t)

		r := runConnect(t, d.path, initializeLine+"\n"+slow(5000)+"\n", "--drain", "100ms", "demo")
		assert.NotEqual(t, 0, r.code, "an answer still due when the drain expired")
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "exactly one line: %q", r.stderr)
		assert.Contains(t, r.stderr, "--drain 100ms passed with 1 answer still due")
		assert.Less(t, r.elapsed, 3*time.Second, "connect must not wait for the 5 s call")
		msgs := parseLines(t, r.stdout)
		require.Len(t, msgs, 1, "only the initialize answer: %s", r.stdout)
		assert.Equal(t, "1", string(msgs[0].ID))
		t.Logf("connect exited after %v", r.elapsed.Round(time.Millisecond))

		delay := testutil.Eventually(t, 2*time.Second, "the daemon cancels the abandoned call upstream", func() (bool, error) {
			st, err := stats.stats()
			return err == nil && len(st.Aborted) == len(before.Aborted)+1, err
		})
		st := stats.mustStats(t)
		assert.Len(t, st.Cancelled, len(before.Cancelled)+1, "exactly one cancellation: %s", st.Cancelled)
		t.Logf("cancellation seen upstream %v after connect exited", delay.Round(time.Millisecond))
	})
}

// TestSecondServeRefused: a second daemon on the same socket_dir refuses to
// start, in one line naming the socket, and leaves the first one serving.
func TestSecondServeRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	cmd := mcpmux(context.Background(), "serve", "--config", d.path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(runTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the second mcpmux serve is still running after %v", runTimeout)
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the second serve must fail")
	assert.NotEqual(t, 0, exit.ExitCode())
	assert.Empty(t, stdout.String(), "stdout")
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "exactly one line: %q", stderr.String())
	// The refusal names the live socket it found, or the socket_dir that
	// holds it (the control socket is the daemon's lock on the folder).
	assert.Contains(t, stderr.String(), d.sockets)
	assert.Contains(t, stderr.String(), "already serving")

	c := open(t, d.socket("demo"))
	require.NoError(t, c.echo("1", "still here"), "the first daemon must keep serving")
}

// TestStaleSocketTakenOver: a daemon killed with SIGKILL leaves its socket
// file behind; the next daemon on the same config takes it over and serves,
// and the killed daemon's server does not outlive it.
func TestStaleSocketTakenOver(t *testing.T) {
	t.Parallel()
	d1 := startDaemon(t, demo("demo", nil), "")
	c := open(t, d1.socket("demo"))
	orphan := c.mustStats(t).PID
	c.close()
	d1.kill()
	require.FileExists(t, d1.socket("demo"), "a SIGKILLed daemon leaves its socket behind")

	d2 := serveConfig(t, d1.daemonConfig)
	c = open(t, d2.socket("demo"))
	require.NoError(t, c.echo("1", "taken over"))
	assert.NotEqual(t, orphan, c.mustStats(t).PID, "the new daemon runs its own server")

	testutil.Eventually(t, 5*time.Second, "the killed daemon's server exits", func() (bool, error) {
		return processGone(orphan), nil
	})
}

// processGone reports whether pid has exited: no such process, or a zombie
// that nobody has reaped yet (a container's init may never do it).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')') // the state follows the command name
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
