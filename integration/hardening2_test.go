package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// manyLarge has n sessions, opened first, send one echo of size bytes each
// at the same moment, and returns what went wrong with each (nil when it
// got its own answer: its id, and its text byte for byte).
func manyLarge(t *testing.T, socket string, n, size int) []error {
	t.Helper()
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = open(t, socket)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range clients {
		wg.Go(func() {
			id := strconv.Quote(fmt.Sprintf("big-%d", i))
			text := strings.Repeat(string(rune('a'+i%26)), size-20) + fmt.Sprintf("%020d", i)
			<-start
			if err := c.send(toolCall(id, "echo", map[string]string{"text": text})); err != nil {
				errs[i] = err
				return
			}
			m, err := awaitWithin(c, id, bigTimeout)
			if err != nil {
				errs[i] = err
				return
			}
			got, err := resultText(m)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%w: %.300s", err, m.Frame)
			case got != text:
				errs[i] = fmt.Errorf("session %d got another text (%d bytes, ending %q)", i, len(got), got[max(0, len(got)-20):])
			}
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// bigTimeout bounds the wait for one answer among many large ones: 256 MB
// through a race-built daemon and server on a shared machine.
const bigTimeout = 3 * time.Minute

// awaitWithin is client.await with a deadline of its own for the whole
// wait, rather than ioTimeout for each read.
func awaitWithin(c *client, id string, d time.Duration) (*jsonrpc.Message, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	for {
		frame, err := c.r.Read()
		if err != nil {
			return nil, fmt.Errorf("waiting for the answer to %s: %w", id, err)
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			return nil, fmt.Errorf("the daemon sent an invalid message %.200q: %w", frame, err)
		}
		if (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && string(m.ID) == id {
			return m, nil
		}
	}
}

// TestManyLargeRequestsWaitForTheWriteQueue: 256 sessions send a request
// of 250 kB each at the same moment, 64 MB for a server whose write queue
// of 4 MiB takes 8 MiB. None is refused with "write queue full": the
// sessions wait for room, and every one gets its own answer. By hand, with
// MCPMUX_STRESS_RUNS set, the requests are of 1 MB (256 MB) and the default
// queue (64 MiB) is tried too: a minute or more under the race detector.
func TestManyLargeRequestsWaitForTheWriteQueue(t *testing.T) {
	for _, tc := range []struct{ name, queue string }{{"default queue", ""}, {"4MiB queue", `write_queue_bytes = "4MiB"`}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.queue == "" && os.Getenv("MCPMUX_STRESS_RUNS") == "" {
				t.Skip("the default queue runs by hand, with MCPMUX_STRESS_RUNS set")
			}
			extra := []string{`max_message_bytes = "2MiB"`}
			if tc.queue != "" {
				extra = append(extra, tc.queue)
			}
			size := 250_000 // 64 MB: still 8 times what the 4 MiB queue takes
			if os.Getenv("MCPMUX_STRESS_RUNS") != "" {
				size = 1_000_000
			}
			d := startDaemon(t, demo("demo", nil, extra...), "")
			began := time.Now()
			errs := manyLarge(t, d.socket("demo"), 256, size)
			failed := 0
			for i, err := range errs {
				if err != nil {
					failed++
					if failed <= 5 {
						t.Errorf("session %d: %v", i, err)
					}
				}
			}
			assert.Zero(t, failed, "sessions without their answer")
			assert.NotContains(t, d.log(), "write queue full")
			t.Logf("256 sessions of %d-byte requests answered in %v", size, time.Since(began).Round(time.Millisecond))
			require.Equal(t, 0, failed)
		})
	}
}

// TestSilentAndStalledConnectionsAreClosed: with first_byte_timeout and
// line_timeout at 500 ms, a connection that sends nothing and a session
// that stops in the middle of a message are closed (the client reads EOF),
// each logged once; a session that says nothing between its messages stays,
// and so does a yamux connection's idle stream.
func TestSilentAndStalledConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), "")
	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	text = []byte(strings.Replace(string(text), "[daemon]\n", "[daemon]\nfirst_byte_timeout = \"500ms\"\nline_timeout = \"500ms\"\n", 1))
	require.NoError(t, os.WriteFile(cfg.path, text, 0o600))
	d := serveConfig(t, cfg)

	idle := open(t, d.socket("demo"))
	ys := yamuxStreamClient(t, dialYamux(t, d.socket("demo")))
	_, err = ys.initialize("2025-06-18")
	require.NoError(t, err)

	began := time.Now()
	silent := dial(t, d.socket("demo"))
	stalled := open(t, d.socket("demo"))
	require.NoError(t, stalled.sendRaw([]byte(`{"jsonrpc":"2.0","id":9,"method":"tools/ca`)))
	for name, c := range map[string]*client{"silent": silent, "stalled": stalled} {
		_, err := c.readFrame()
		assert.ErrorIs(t, err, io.EOF, "%s: closed by the daemon", name)
	}
	closed := time.Since(began)
	assert.Less(t, closed, 5*time.Second)

	assert.NoError(t, idle.echo(`"later"`, "still here"), "silence between messages is no stall")
	assert.NoError(t, ys.echo(`"later"`, "still here"), "nor on a yamux stream")
	assert.Equal(t, 1, strings.Count(d.log(), "closed a connection that sent nothing within first_byte_timeout"), "%s", d.log())
	assert.Equal(t, 1, strings.Count(d.log(), "closed a session that stalled in the middle of a message"))
	t.Logf("silent and stalled connections closed %v after they began (timeouts 500 ms)", closed.Round(time.Millisecond))
}

// TestQueuedBytesBoundEvictsTheLargest: max_queued_bytes of 24 MiB across
// all sessions. Session A asks for three 6 MB results and reads none; B
// then asks for two and reads none yet: together they pass the bound, and
// A, which holds the most, is disconnected; B then reads both of its
// answers, and a third session is served throughout.
func TestQueuedBytesBoundEvictsTheLargest(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), "outbox_max = \"24MiB\"")
	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	text = []byte(strings.Replace(string(text), "[daemon]\n", "[daemon]\nmax_queued_bytes = \"24MiB\"\n", 1))
	require.NoError(t, os.WriteFile(cfg.path, text, 0o600))
	d := serveConfig(t, cfg)

	a, b, other := open(t, d.socket("demo")), open(t, d.socket("demo")), open(t, d.socket("demo"))
	require.NoError(t, a.send(hugeRequests(3, 6_000_000)...))
	require.NoError(t, other.echo(`"between"`, "served"), "the server answered A's calls first")
	require.NoError(t, b.send(hugeRequests(2, 6_000_000)...))
	testutil.Until(t, 2*time.Minute, "A evicted", func() bool {
		return strings.Contains(d.log(), "evicting the client with the most answers queued")
	})
	for i := range 2 {
		b.conn.SetReadDeadline(time.Now().Add(time.Minute))
		frame, err := b.r.Read()
		require.NoError(t, err, "B's answer %d", i)
		assert.Greater(t, len(frame), 6_000_000)
	}
	a.conn.SetReadDeadline(time.Now().Add(time.Minute))
	_, err = io.Copy(io.Discard, a.conn)
	assert.NoError(t, err, "A reads what the socket held, then EOF")
	assert.NoError(t, other.echo(`"after"`, "served"))
	assert.Regexp(t, `evicting the client with the most answers queued.* queued_bytes=1[0-9]{7} max_queued_bytes=25165824`, d.log())
}

// TestReloadRestartHoldsRequests: a reload that changes a server's command
// restarts it with its sessions kept; requests that arrive while it
// restarts (the new process takes 1 s to start) wait for it and are
// answered, as they are across a crash restart, none failed at once. A
// client sends an echo every 10 ms from before the reload until well after.
func TestReloadRestartHoldsRequests(t *testing.T) {
	d := startDaemon(t, demo("r", nil), "")
	c := open(t, d.socket("r"))
	before := c.mustStats(t).PID

	const n = 200
	sent := make(chan error, 1)
	go func() { // waited for below
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			<-tick.C
			if err := c.send(toolCall(strconv.Itoa(i), "echo", map[string]string{"text": fmt.Sprintf("call %d", i)})); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	rewrite(t, d, demo("r", []string{"--start-delay", "1s"}))
	out, err := reload(t, d)
	require.NoError(t, err, "reload: %s", out)
	assert.Equal(t, "restarted: r\n", out)

	failed := map[string]string{}
	for range n {
		m, err := awaitAny(c, 30*time.Second)
		require.NoError(t, err)
		if text, err := resultText(m); err != nil || text != "call "+string(m.ID) {
			failed[string(m.ID)] = string(m.Frame)
		}
	}
	require.NoError(t, <-sent)
	assert.Empty(t, failed, "calls failed or answered wrong across the reload")
	assert.NotEqual(t, before, c.mustStats(t).PID, "a new process serves the same session")
}

// awaitAny reads the next answer, within d.
func awaitAny(c *client, d time.Duration) (*jsonrpc.Message, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	for {
		frame, err := c.r.Read()
		if err != nil {
			return nil, err
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			return nil, err
		}
		if m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError {
			return m, nil
		}
	}
}

// TestTokenRotate: `mcpmux token rotate` replaces the generated web token
// (never printing it) and names the running daemon, which takes the new
// token at once and the old one for its grace minute; the next daemon
// takes the new one and refuses the old. The daemon and the command share
// a state folder of the test's own.
func TestTokenRotate(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), `http = "127.0.0.1:0"`)
	state := filepath.Join(cfg.dir, "state")
	cfg.env = []string{"XDG_STATE_HOME=" + state}
	tokenFile := filepath.Join(state, "mcpmux", "http.token")
	d := serveConfig(t, cfg)
	readToken := func() string {
		b, err := os.ReadFile(tokenFile)
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	status := func(d *daemon, token string) int {
		_, resp, _ := dialWebSocket(t, d.wsURL("demo"), http.Header{"Authorization": {"Bearer " + token}})
		require.NotNil(t, resp)
		return resp.StatusCode
	}
	old := readToken()
	require.Equal(t, http.StatusSwitchingProtocols, status(d, old))

	r := runMcpmux(t, cfg.env, "", "token", "rotate", "--config", cfg.path)
	require.Zero(t, r.code, "token rotate: %s", r.stderr)
	fresh := readToken()
	assert.NotEqual(t, old, fresh)
	assert.Regexp(t, `^[0-9a-f]{64}$`, fresh)
	assert.Contains(t, r.stdout, "new token written to "+tokenFile)
	assert.Contains(t, r.stdout, fmt.Sprintf("(pid %d) takes the new token at once, and the old one for another 1m0s", d.cmd.Process.Pid))
	assert.NotContains(t, r.stdout+r.stderr, fresh, "never printed")
	assert.Equal(t, http.StatusSwitchingProtocols, status(d, fresh), "the running daemon takes the new token, as it says")
	assert.Equal(t, http.StatusSwitchingProtocols, status(d, old), "and the old one, within its grace")

	d.stop()
	d2 := serveConfig(t, cfg)
	assert.Equal(t, http.StatusUnauthorized, status(d2, old), "the old token is refused")
	assert.Equal(t, http.StatusSwitchingProtocols, status(d2, fresh), "the new one is taken")
}

// TestAutostartLogIsRotated: the daemon auto-start runs logs into its file
// itself (serve --log-file, as connect passes it) and rotates it by size.
// With a bound of 64 KiB (--log-max, for the test) and a server that writes
// a stderr line per request, 2,000 calls leave the log and its two older
// files each within the bound, no third, and the daemon's last lines in the
// current file.
func TestAutostartLogIsRotated(t *testing.T) {
	t.Parallel()
	const max = 64 << 10
	cfg := writeConfig(t, demo("demo", []string{"--stderr-noise"}), "")
	logPath := filepath.Join(cfg.dir, "mcpmux.log")
	d := &daemon{daemonConfig: cfg, tb: t, exited: make(chan struct{})}
	d.cmd = mcpmux(context.Background(), "serve", "--config", cfg.path, "--autostarted", "--log-file", logPath, "--log-max", strconv.Itoa(max))
	d.cmd.Stdout, d.cmd.Stderr = &d.stdout, &d.stderr
	require.NoError(t, d.cmd.Start())
	trackDaemon(d, true)
	go func() { // owned by stop
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(d.stop)
	d.waitReady()

	c := open(t, d.socket("demo"))
	var frames [][]byte
	for i := range 2000 {
		frames = append(frames, toolCall(strconv.Itoa(i), "echo", map[string]string{"text": "x"}))
	}
	require.NoError(t, c.send(frames...))
	for range 2000 {
		_, err := awaitAny(c, ioTimeout)
		require.NoError(t, err)
	}
	d.stop()
	assert.Empty(t, d.stderr.String(), "the daemon logged into its file, not stderr")
	total := 0
	for _, p := range []string{logPath, logPath + ".1", logPath + ".2"} {
		fi, err := os.Stat(p)
		require.NoError(t, err, "%s", p)
		assert.LessOrEqual(t, fi.Size(), int64(max), p)
		total += int(fi.Size())
	}
	_, err := os.Stat(logPath + ".3")
	assert.True(t, os.IsNotExist(err), "two older files kept, no more")
	last, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Contains(t, string(last), "mcpmux stopped", "the newest lines are in the current file")
	t.Logf("2,000 calls with a stderr line each: %d bytes kept in 3 files of at most %d", total, max)
}

// TestConnectOutlivesFirstByteTimeout: an editor that starts mcpmux connect
// and says nothing for longer than first_byte_timeout loses nothing: the
// daemon closes connect's silent connection, connect reaches it again
// quietly (even with --reconnect 0), and the initialize sent afterwards is
// answered, with nothing on stderr. (A first message that crosses the
// daemon's close of a silent connection is not lost either: the daemon
// never read it, and connect sends it again on the new connection.)
func TestConnectOutlivesFirstByteTimeout(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), "")
	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	// 1 s: the initialize goes out just after connect reached the daemon
	// again, well within its new connection's second.
	text = []byte(strings.Replace(string(text), "[daemon]\n", "[daemon]\nfirst_byte_timeout = \"1s\"\n", 1))
	require.NoError(t, os.WriteFile(cfg.path, text, 0o600))
	d := serveConfig(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := mcpmux(ctx, "connect", "--config", d.path, "--reconnect", "0", "demo")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	testutil.Until(t, 10*time.Second, "the daemon closes connect's silent connection", func() bool {
		return strings.Contains(d.log(), "closed a connection that sent nothing within first_byte_timeout")
	})
	_, err = io.WriteString(stdin, initializeLine+"\n")
	require.NoError(t, err)
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	require.NoError(t, err, "the initialize answer; stderr: %s", stderr.String())
	m, err := jsonrpc.Parse(bytes.TrimSuffix(line, []byte("\n")))
	require.NoError(t, err)
	assert.Equal(t, jsonrpc.KindResult, m.Kind, "%s", line)
	assert.Empty(t, stderr.String())
}
