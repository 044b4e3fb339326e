package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// runCLIErr runs one mcpmux command in-process and returns its stdout and
// its stderr apart.
func runCLIErr(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestBrokenConfigKeepsClients: once the config file of a running daemon
// stops loading, status, restart and logs still reach the daemon through
// its record and warn naming the file, the line and the key; reload still
// refuses the file. A socket_dir changed in the file while the daemon runs
// does not lose it either.
func TestBrokenConfigKeepsClients(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	state, err := config.StateDir(os.Getenv)
	require.NoError(t, err)
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "mux.toml")
	good := "[listen]\nsocket_dir = \"s\"\n\n[servers.idle]\ncommand = \"sleep\"\nargs = [\"60\"]\nstdin_grace = \"0s\"\nterm_grace = \"1s\"\n"
	require.NoError(t, os.WriteFile(path, []byte(good), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)

	served, _, cancel := serveInBackground(t, cfg, daemonEnv{environ: []string{"PATH=/usr/bin:/bin"}, state: state})
	defer cancel()
	testutil.Until(t, 10*time.Second, "the daemon has written its record", func() bool {
		_, ok := daemon.ReadRecord(state, path)
		return ok
	})
	// The record is written before the server has logged its start.
	testutil.Until(t, 10*time.Second, "idle has logged its start", func() bool {
		out, _, err := runCLIErr(t.Context(), "logs", "idle", "--config", path)
		return err == nil && strings.Contains(out, "server started")
	})

	broken := strings.Replace(good, "stdin_grace", "stdin_grac", 1)
	require.NoError(t, os.WriteFile(path, []byte(broken), 0o600))
	wantWarning := path + ":7: servers.idle.stdin_grac: unknown key (did you mean stdin_grace?)"
	out, errOut, err := runCLIErr(t.Context(), "status", "--json", "--config", path)
	require.NoError(t, err, "status with a broken config: %s", errOut)
	var st daemon.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st), "stdout is the status alone: %s", out)
	assert.Equal(t, [2]any{path, 1}, [2]any{st.Config, len(st.Servers)}, "the running daemon answered")
	assert.Contains(t, errOut, "mcpmux: warning: "+wantWarning+"\n", "status warns naming file, line and key")

	out, errOut, err = runCLIErr(t.Context(), "restart", "idle", "--config", path)
	assert.Equal(t, [2]any{nil, "restarting idle\n"}, [2]any{err, out}, "restart with a broken config")
	assert.Contains(t, errOut, wantWarning)
	out, errOut, err = runCLIErr(t.Context(), "logs", "idle", "--config", path)
	assert.NoError(t, err, "logs with a broken config: %s", errOut)
	assert.Contains(t, out, "server started")
	assert.Contains(t, errOut, wantWarning)

	_, _, err = runCLIErr(t.Context(), "reload", "--config", path)
	assert.EqualError(t, err, wantWarning, "reload refuses the file")

	moved := strings.Replace(good, `socket_dir = "s"`, `socket_dir = "elsewhere"`, 1)
	require.NoError(t, os.WriteFile(path, []byte(moved), 0o600))
	out, errOut, err = runCLIErr(t.Context(), "status", "--json", "--config", path)
	require.NoError(t, err, "status after socket_dir changed: %s", errOut)
	assert.Empty(t, errOut, "nothing to warn about")
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, path, st.Config, "the daemon is found where it serves")

	cancel()
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	_, _, err = runCLIErr(t.Context(), "status", "--config", path)
	assert.ErrorContains(t, err, filepath.Join(dir, "elsewhere"), "no daemon: the file says where to look")
}

// TestConnectNotServed: a connect to a server the running daemon does not
// serve says what it serves: a server added to the file but not reloaded,
// or, while the file does not load, any name it does not serve.
func TestConnectNotServed(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	state, err := config.StateDir(os.Getenv)
	require.NoError(t, err)
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "mux.toml")
	good := "[listen]\nsocket_dir = \"s\"\n\n[servers.idle]\ncommand = \"sleep\"\nargs = [\"60\"]\nstdin_grace = \"0s\"\nterm_grace = \"1s\"\n"
	require.NoError(t, os.WriteFile(path, []byte(good), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	served, _, cancel := serveInBackground(t, cfg, daemonEnv{environ: []string{"PATH=/usr/bin:/bin"}, state: state})
	defer func() {
		cancel()
		assert.NoError(t, <-served)
	}()
	testutil.Until(t, 10*time.Second, "the daemon has written its record", func() bool {
		_, ok := daemon.ReadRecord(state, path)
		return ok
	})
	sockets := filepath.Join(dir, "s")

	require.NoError(t, os.WriteFile(path, []byte(good+"\n[servers.more]\ncommand = \"sleep\"\n"), 0o600))
	_, _, err = runCLIErr(t.Context(), "connect", "--config", path, "more")
	assert.EqualError(t, err, "the mcpmux daemon on "+sockets+" (pid "+strconv.Itoa(os.Getpid())+
		") does not serve more; it serves idle; more is in "+path+": run `mcpmux reload` to serve it")

	require.NoError(t, os.WriteFile(path, []byte(good+"\n[servers.more]\ncomand = \"sleep\"\n"), 0o600))
	_, errOut, err := runCLIErr(t.Context(), "connect", "--config", path, "more")
	assert.ErrorContains(t, err, "does not serve more; it serves idle", "a broken file: the daemon says")
	assert.Contains(t, errOut, "servers.more.comand: unknown key")
}

// TestUsersDaemonWithoutConfig: with no config file to read (none named,
// no HOME to find one by, or a --config that does not exist), status and
// connect reach the daemon this user runs in the default socket folder,
// say so, and know its servers; with none running, the error says what to
// do about the file.
func TestUsersDaemonWithoutConfig(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "mux.toml")
	require.NoError(t, os.WriteFile(path, []byte("[listen]\nsocket_dir = \"s\"\n\n[servers.idle]\ncommand = \"sleep\"\nargs = [\"60\"]\nstdin_grace = \"0s\"\nterm_grace = \"1s\"\n"), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	sockets := filepath.Join(dir, "s")
	was := defaultSocketDir
	defaultSocketDir = func() string { return sockets }
	t.Cleanup(func() { defaultSocketDir = was })
	served, _, cancel := serveInBackground(t, cfg, daemonEnv{environ: []string{"PATH=/usr/bin:/bin"}})
	defer cancel()
	missing := filepath.Join(dir, "elsewhere.toml")
	testutil.Eventually(t, 10*time.Second, "status reaches the daemon without a config", func() (bool, error) {
		_, _, err := runCLIErr(t.Context(), "status", "--config", missing)
		return err == nil, nil
	})

	out, errOut, err := runCLIErr(t.Context(), "status", "--json", "--config", missing)
	require.NoError(t, err, "status with a missing --config: %s", errOut)
	var st daemon.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st), "stdout is the status alone: %s", out)
	assert.Equal(t, path, st.Config, "the user's daemon answered")
	assert.Equal(t, "mcpmux: warning: config "+missing+" does not exist: "+config.MissingAdvice+"; using the daemon that serves in "+
		sockets+" (pid "+strconv.Itoa(os.Getpid())+", config "+path+")\n", errOut)

	for _, k := range []string{"MCPMUX_CONFIG", "XDG_CONFIG_HOME", "HOME"} {
		t.Setenv(k, "")
	}
	_, errOut, err = runCLIErr(t.Context(), "status")
	require.NoError(t, err, "status with no HOME: %s", errOut)
	assert.Contains(t, errOut, "using the daemon that serves in "+sockets)
	_, _, err = runCLIErr(t.Context(), "connect", "nosuch")
	assert.ErrorContains(t, err, "nosuch", "connect refuses a name the daemon does not serve")
	assert.ErrorContains(t, err, "idle", "and names the servers it has")

	cancel()
	require.NoError(t, <-served)
	_, _, err = runCLIErr(t.Context(), "status", "--config", missing)
	assert.EqualError(t, err, "config "+missing+" does not exist: "+config.MissingAdvice, "no daemon: the file's error")
}
