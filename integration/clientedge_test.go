package integration

import (
	"context"
	"os"
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
	warning := cfg.path + ":" + strconv.Itoa(i+2) + ": servers.demo.comand: unknown key"

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
		stopPid(t, st.Pid)
	}
	t.Logf("outcomes of 5 rounds: %v", outcomes)
	if msg != "" {
		t.Logf("the serve by hand said: %s", msg)
	}
}

// stopPid sends SIGTERM to a daemon the test did not start and waits for it.
func stopPid(tb testing.TB, pid int) {
	tb.Helper()
	require.NoError(tb, syscall.Kill(pid, syscall.SIGTERM))
	testutil.Until(tb, stopTimeout, "the daemon exits", func() bool { return gone(pid) })
}
