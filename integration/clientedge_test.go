package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// The client edge: what `mcpmux connect` and the commands that talk to a
// daemon do when the config, the daemon or the environment is not what it
// was when the daemon started.

// withState gives cfg a state folder of its own, for the daemon and for
// every command the test runs with the env it returns.
func withState(tb testing.TB, cfg *daemonConfig) []string {
	tb.Helper()
	cfg.env = append(cfg.env, "XDG_STATE_HOME="+filepath.Join(cfg.dir, "state"))
	return cfg.env
}

// daemonLog is the log file of a daemon auto-started for cfg (withState).
func daemonLog(cfg *daemonConfig) string {
	return filepath.Join(cfg.dir, "state", "mcpmux", "mcpmux.log")
}

// TestConnectBrokenConfig: a typo added to the config of a running daemon
// does not cut its clients off: connect and status still reach the daemon
// (through the record it wrote when it started) and warn, naming the file,
// the line and the key; reload refuses the file and the daemon goes on.
func TestConnectBrokenConfig(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), "")
	env := withState(t, cfg)
	d := serveConfig(t, cfg)

	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	lines := strings.Split(string(text), "\n")
	i := slices.Index(lines, "[servers.demo]")
	require.GreaterOrEqual(t, i, 0, "the config has [servers.demo]:\n%s", text)
	lines = append(lines[:i+1], append([]string{`comand = "typo"`}, lines[i+1:]...)...)
	require.NoError(t, os.WriteFile(cfg.path, []byte(strings.Join(lines, "\n")), 0o600))
	warning := cfg.path + ":" + strconv.Itoa(i+2) + ": servers.demo.comand: unknown key (did you mean command?)"

	echo := string(toolCall("2", "echo", map[string]string{"text": "still here"}))
	r := runMcpmux(t, env, initializeLine+"\n"+echo+"\n", "connect", "--config", cfg.path, "demo")
	require.Equal(t, 0, r.code, "connect exit code; stderr: %s", r.stderr)
	msgs := parseLines(t, r.stdout)
	require.Len(t, msgs, 2, "stdout: %s", r.stdout)
	assert.Equal(t, []string{"1", "2"}, []string{string(msgs[0].ID), string(msgs[1].ID)})
	text2, err := resultText(msgs[1])
	require.NoError(t, err)
	assert.Equal(t, "still here", text2)
	assert.Contains(t, r.stderr, "mcpmux: warning: "+warning+"\n", "connect warns naming the key")

	r = runMcpmux(t, env, "", "status", "--config", cfg.path)
	require.Equal(t, 0, r.code, "status exit code; stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "demo", "status lists the server:\n%s", r.stdout)
	assert.Contains(t, r.stderr, "mcpmux: warning: "+warning+"\n", "status warns naming the key")

	r = runMcpmux(t, env, "", "reload", "--config", cfg.path)
	assert.NotEqual(t, 0, r.code, "reload refuses a broken config")
	assert.Contains(t, r.stderr, warning)
	c := open(t, d.socket("demo"))
	require.NoError(t, c.echo("1", "after the refused reload"), "the daemon goes on")
}

// TestConnectUnknownServer: a name the config does not have is refused at
// once, in one line naming the configured servers, and no daemon is
// started for it; with a daemon running, the same.
func TestConnectUnknownServer(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("alpha", nil)+demo("beta", nil), "")
	env := withState(t, cfg)
	want := `no server named "gamma" in ` + cfg.path + "; it configures: alpha, beta"

	r := runMcpmux(t, env, initializeLine+"\n", "connect", "--config", cfg.path, "gamma")
	assert.NotEqual(t, 0, r.code, "exit code")
	assert.Empty(t, r.stdout, "stdout")
	assert.Equal(t, "mcpmux: "+want+"\n", r.stderr, "one line naming the configured servers")
	assert.Less(t, r.elapsed, 5*time.Second, "refused at once")
	t.Logf("refused after %v", r.elapsed.Round(time.Millisecond))
	_, err := os.Stat(filepath.Join(cfg.sockets, ".control.sock"))
	assert.True(t, os.IsNotExist(err), "no daemon was started: %v", err)
	_, err = os.Stat(filepath.Join(cfg.dir, "state", "mcpmux", "mcpmux.log"))
	assert.True(t, os.IsNotExist(err), "no daemon log was opened: %v", err)

	serveConfig(t, cfg)
	r = runMcpmux(t, env, initializeLine+"\n", "connect", "--config", cfg.path, "gamma")
	assert.NotEqual(t, 0, r.code, "exit code with a daemon running")
	assert.Equal(t, "mcpmux: "+want+"\n", r.stderr, "the same line with a daemon running")
}

// TestServeThenConnect: `mcpmux serve &` followed at once by a connect.
// The connect never fails: it waits for the daemon that is starting, or
// starts one itself if it got there first, and then the serve started by
// hand says clearly that an auto-started daemon serves its config.
func TestServeThenConnect(t *testing.T) {
	t.Parallel()
	echo := string(toolCall("2", "echo", map[string]string{"text": "raced"}))
	outcomes := map[string]int{}
	var msg string
	for round := range 5 {
		cfg := writeConfig(t, demo("demo", nil), "")
		env := withState(t, cfg)
		d := &daemon{daemonConfig: cfg, tb: t, exited: make(chan struct{})}
		d.cmd = mcpmux(context.Background(), "serve", "--config", cfg.path)
		d.cmd.Env = append(d.cmd.Environ(), env...)
		d.cmd.Stdout, d.cmd.Stderr = &d.stdout, &d.stderr
		require.NoError(t, d.cmd.Start())
		trackDaemon(d, true)
		go func() { // owned by d.stop, which waits for exited
			d.waitErr = d.cmd.Wait()
			close(d.exited)
		}()
		t.Cleanup(d.stop)

		r := runMcpmux(t, env, initializeLine+"\n"+echo+"\n", "connect", "--config", cfg.path, "demo")
		require.Equal(t, 0, r.code, "round %d: connect exit code; stderr: %s", round, r.stderr)
		msgs := parseLines(t, r.stdout)
		require.Len(t, msgs, 2, "round %d: stdout: %s", round, r.stdout)
		text, err := resultText(msgs[1])
		require.NoError(t, err)
		assert.Equal(t, "raced", text)

		st := status(t, cfg.path, env...)
		if st.Pid == d.cmd.Process.Pid {
			outcomes["serve first"]++
			continue
		}
		outcomes["connect first"]++
		// The auto-started daemon won: the serve by hand says so, then the
		// test stops the daemon the connect started.
		select {
		case <-d.exited:
		case <-time.After(runTimeout):
			t.Fatalf("round %d: the serve started by hand neither serves nor exits", round)
		}
		d.killed = true // it exits non-zero on purpose
		assert.Error(t, d.waitErr, "round %d: the serve by hand exits non-zero", round)
		assert.Equal(t, 1, strings.Count(d.stderr.String(), "\n"), "round %d: one line: %q", round, d.stderr.String())
		assert.Contains(t, d.stderr.String(), "auto-started by `mcpmux connect`", "round %d", round)
		assert.Contains(t, d.stderr.String(), "it serves this config already", "round %d", round)
		msg = d.stderr.String()
		stopPid(t, st.Pid, daemonLog(cfg))
	}
	t.Logf("outcomes of 5 rounds: %v", outcomes)
	if msg != "" {
		t.Logf("the serve by hand said: %s", msg)
	}
}

// stopPid sends SIGTERM to a daemon the test did not start and waits for
// it. One that outlives stopTimeout is sent SIGQUIT, which writes its
// goroutines into its log, and the test fails with the log it names.
func stopPid(tb testing.TB, pid int, log string) {
	tb.Helper()
	require.NoError(tb, syscall.Kill(pid, syscall.SIGTERM))
	deadline := time.Now().Add(stopTimeout)
	for !gone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGQUIT)
			testutil.Until(tb, stopTimeout, "the daemon exits on SIGQUIT", func() bool { return gone(pid) })
			text, err := os.ReadFile(log)
			tb.Fatalf("daemon %d did not exit within %v of SIGTERM; its log %s (%v):\n%s", pid, stopTimeout, log, err, text)
		}
		time.Sleep(10 * time.Millisecond) // polling the process table
	}
}

// inflight is how many requests server name has in flight, as status says.
func inflight(tb testing.TB, cfg string, name string, env ...string) int {
	tb.Helper()
	for _, s := range status(tb, cfg, env...).Servers {
		if s.Name == name {
			return s.Inflight
		}
	}
	return 0
}

// TestConnectReconnects: the bridge that stays. Its session ends under a
// client that is still there (the daemon stops and comes back, the
// daemon is killed and connect starts one itself, a reload replaces the
// server): the request in flight gets an error with its own id at once,
// connect reconnects and replays the client's initialize, tells the client
// the lists may have changed, and the next request on the same stdio is
// answered. stdout is never closed in between, and stays protocol only.
func TestConnectReconnects(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		lose  func(t *testing.T, d *daemon) // ends the session
		after func(t *testing.T, d *daemon) // brings a daemon back, if the bridge does not
	}{
		{
			name: "the daemon stops and comes back",
			args: []string{"--no-autostart"},
			lose: func(t *testing.T, d *daemon) { d.stop() },
			after: func(t *testing.T, d *daemon) {
				serveConfig(t, d.daemonConfig)
			},
		},
		{
			name: "the daemon is killed and connect starts one",
			lose: func(t *testing.T, d *daemon) { d.kill() },
		},
		{
			name: "over yamux, the daemon is killed and connect starts one",
			args: []string{"--yamux"},
			lose: func(t *testing.T, d *daemon) { d.kill() },
		},
		{
			name: "a reload replaces the server",
			lose: func(t *testing.T, d *daemon) {
				text, err := os.ReadFile(d.path)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(d.path, []byte(strings.Replace(string(text), "[servers.demo]\n", "[servers.demo]\nmax_sessions = 99\n", 1)), 0o600))
				r := runMcpmux(t, d.env, "", "reload", "--config", d.path)
				require.Equal(t, 0, r.code, "reload: %s", r.stderr)
				require.Equal(t, "replaced: demo\n", r.stdout)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeConfig(t, demo("demo", nil), "")
			env := withState(t, cfg)
			d := serveConfig(t, cfg)
			b := startBridge(t, env, append(tt.args, "--config", cfg.path, "demo")...)
			b.send([]byte(initializeLine), notification("notifications/initialized", nil))
			init, _ := b.await("1")
			require.Equal(t, jsonrpc.KindResult, init.Kind, "initialize: %s", init.Frame)
			b.send(slowCall(`"slow"`, 20000, 1, ""))
			testutil.Until(t, ioTimeout, "the slow call is in flight", func() bool { return inflight(t, cfg.path, "demo", env...) == 1 })

			start := time.Now()
			tt.lose(t, d)
			m, _ := b.await(`"slow"`)
			lostAfter := time.Since(start)
			e, err := errorOf(m)
			require.NoError(t, err)
			assert.Equal(t, [2]string{"daemon_gone", "demo"}, [2]string{e.Data.Reason, e.Data.Server}, "the request in flight: %s", m.Frame)
			if tt.after != nil {
				tt.after(t, d)
			}

			b.send(toolCall("3", "echo", map[string]string{"text": "after"}))
			answer, before := b.await("3")
			text, err := resultText(answer)
			require.NoError(t, err, "the next request is answered; stderr:\n%s", b.stderr.String())
			assert.Equal(t, "after", text)
			assert.Contains(t, methods(before), "notifications/tools/list_changed", "the client is told its lists may have changed")
			t.Logf("in-flight error %v after the loss; next request answered %v after it", lostAfter.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

			st := status(t, cfg.path, env...)
			if st.Pid != d.cmd.Process.Pid {
				t.Cleanup(func() { stopPid(t, st.Pid, daemonLog(cfg)) }) // the daemon this connect started
			}
			require.Len(t, st.Servers, 1)
			var sessions []string
			for _, s := range st.Servers[0].SessionList {
				sessions = append(sessions, s.Client+" "+s.Protocol)
			}
			assert.Equal(t, []string{"printf 2025-06-18"}, sessions, "the new session was initialized with the client's own initialize")
			rest, code := b.closeStdin()
			assert.Equal(t, 0, code, "connect exits 0 at stdin EOF; stderr:\n%s", b.stderr.String())
			assert.Empty(t, rest, "nothing more on stdout")
			assert.Contains(t, b.stderr.String(), "reconnecting", "stderr says it lost the session")
			assert.Contains(t, b.stderr.String(), "mcpmux: reconnected to "+cfg.socket("demo"), "stderr says it reconnected")
		})
	}
}

// TestConnectReinitialize: a client that sends initialize again on the
// same connect each time it is re-entered (FastMCP's Client does, by
// default) is answered every time, and its calls in between too.
func TestConnectReinitialize(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	b := startBridge(t, nil, "--config", d.path, "demo")
	for round := 1; round <= 3; round++ {
		initID, callID := strconv.Itoa(2*round), strconv.Itoa(2*round+1)
		b.send(request(initID, "initialize", map[string]any{
			"protocolVersion": "2025-06-18",
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "fastmcp-like", "version": strconv.Itoa(round)},
		}), notification("notifications/initialized", nil))
		init, _ := b.await(initID)
		require.Equal(t, jsonrpc.KindResult, init.Kind, "initialize number %d: %s", round, init.Frame)
		b.send(toolCall(callID, "echo", map[string]string{"text": "round " + strconv.Itoa(round)}))
		answer, _ := b.await(callID)
		text, err := resultText(answer)
		require.NoError(t, err, "the call after initialize number %d", round)
		assert.Equal(t, "round "+strconv.Itoa(round), text)
	}
	rest, code := b.closeStdin()
	assert.Equal(t, [2]any{0, 0}, [2]any{code, len(rest)}, "exit code and lines left; stderr: %s", b.stderr.String())
}

// TestConnectStrippedEnvironment: a connect started with only HOME and
// PATH in its environment, as many clients start their servers, finds the
// config in the default place and reaches the daemon the user started
// with a full environment, not a second one.
func TestConnectStrippedEnvironment(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), "")
	home := testutil.ShortDir(t)
	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	cfg.path = filepath.Join(home, ".config", "mcpmux", "mux.toml")
	require.NoError(t, os.MkdirAll(filepath.Dir(cfg.path), 0o700))
	require.NoError(t, os.WriteFile(cfg.path, []byte(text), 0o600))
	withState(t, cfg)
	cfg.env = append(cfg.env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "elsewhere"), "XDG_RUNTIME_DIR="+filepath.Join(home, "run"))
	d := serveConfig(t, cfg)
	want := open(t, d.socket("demo")).mustStats(t).PID

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.mcpmux, "connect", "--no-autostart", "demo")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(initializeLine + "\n" + string(toolCall("2", "stats", nil)) + "\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "connect with only HOME and PATH; stderr: %s", stderr.String())
	msgs := parseLines(t, stdout.String())
	require.Len(t, msgs, 2, "stdout: %s", stdout.String())
	var st demoStats
	require.NoError(t, decodeStructured(msgs[1], &st))
	assert.Equal(t, want, st.PID, "the same server process as the user's daemon runs")
	assert.Empty(t, stderr.String())
}

// TestConnectTooManySessions: a daemon that refuses the session because
// the server has max_sessions already: the request in flight gets that
// error with its id, and connect exits non-zero naming the reason (not
// "connection reset by peer").
func TestConnectTooManySessions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil, "max_sessions = 1"), "")
	open(t, d.socket("demo"))
	b := startBridge(t, nil, "--config", d.path, "demo")
	b.send([]byte(initializeLine))
	m, _ := b.await("1")
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, "too_many_sessions", e.Data.Reason, "the request in flight: %s", m.Frame)
	rest, code := b.closeStdin()
	assert.NotEqual(t, 0, code, "exit code")
	assert.Empty(t, rest)
	assert.Equal(t, 1, strings.Count(b.stderr.String(), "\n"), "one line: %q", b.stderr.String())
	assert.Contains(t, b.stderr.String(), "refused the session")
	assert.Contains(t, b.stderr.String(), "(too_many_sessions)")
	assert.NotContains(t, b.stderr.String(), "reset by peer")
	assert.NotContains(t, b.stderr.String(), "daemon_gone", "the answers were the refusal, not daemon_gone")
}
