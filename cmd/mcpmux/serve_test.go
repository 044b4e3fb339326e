package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// runCLI runs one mcpmux command in-process and returns its stdout.
func runCLI(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// serveInBackground runs serve with cfg and env (its stderr: the returned
// log) until the returned cancel; served gets what serve returned.
func serveInBackground(t *testing.T, cfg *config.Config, env daemonEnv) (served <-chan error, log *testutil.Buffer, cancel context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	log = &testutil.Buffer{}
	env.stderr = log
	go func() { // its end is sent on served, which the test waits for
		done <- serve(ctx, cfg, env, newLogger(cfg, log))
	}()
	return done, log, cancel
}

// TestServeInProcess drives `serve` and the commands that talk to it:
// status, reload (a server added, a change to [daemon] reported as not
// applied), restart, logs, and a shutdown when the context ends.
func TestServeInProcess(t *testing.T) {
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "mux.toml")
	head := "[listen]\nsocket_dir = \"s\"\n"
	require.NoError(t, os.WriteFile(path, []byte(head), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)

	served, log, cancel := serveInBackground(t, cfg, daemonEnv{environ: []string{"PATH=/usr/bin:/bin"}})
	defer cancel()
	ctx := t.Context()
	var st daemon.Status
	testutil.Eventually(t, 10*time.Second, "status answers", func() (bool, error) {
		out, err := runCLI(ctx, "status", "--json", "--config", path)
		if err != nil {
			return false, err
		}
		return true, json.Unmarshal([]byte(out), &st)
	})
	assert.Equal(t, [3]any{mcpmuxVersion(), path, 0}, [3]any{st.Version, st.Config, len(st.Servers)}, "status of a daemon with no servers")
	assert.Contains(t, log.String(), `msg="the config has no servers`, "serve warns of an empty config")

	server := "[servers.idle]\ncommand = \"sleep\"\nargs = [\"60\"]\nstdin_grace = \"0s\"\nterm_grace = \"1s\"\n"
	require.NoError(t, os.WriteFile(path, []byte("[daemon]\nlog_level = \"debug\"\n"+head+server), 0o600))
	out, err := runCLI(ctx, "reload", "--config", path)
	require.NoError(t, err, "reload: %s", out)
	assert.Equal(t, "added: idle\nnot applied until the daemon restarts: [daemon]\n", out)

	out, err = runCLI(ctx, "restart", "idle", "--config", path)
	assert.Equal(t, [2]any{nil, "restarting idle\n"}, [2]any{err, out})
	_, err = runCLI(ctx, "restart", "nope", "--config", path)
	assert.EqualError(t, err, `no server named "nope"`)
	out, err = runCLI(ctx, "status", "--config", path)
	require.NoError(t, err)
	assert.Contains(t, out, "idle", "the table lists the added server:\n%s", out)
	testutil.Eventually(t, 10*time.Second, "logs show the server started", func() (bool, error) {
		out, err := runCLI(ctx, "logs", "idle", "--config", path)
		return strings.Contains(out, "server started"), err
	})

	require.NoError(t, os.WriteFile(path, []byte(head+"[servers.x]\ncommand = 5\n"), 0o600))
	_, err = runCLI(ctx, "reload", "--config", path)
	assert.EqualError(t, err, path+":4: servers.x.command: must be a string (got an integer)", "reload checks the file before it asks")

	cancel()
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	_, err = os.Stat(filepath.Join(dir, "s", daemon.ControlSocket))
	assert.True(t, os.IsNotExist(err), "the control socket is removed: %v", err)
	assert.True(t, strings.Contains(log.String(), "mcpmux stopped"), "log:\n%s", log.String())
}

// TestServeRefusesRemoteWeb: a web address beyond loopback without
// http_allow_remote stops serve before anything opens.
func TestServeRefusesRemoteWeb(t *testing.T) {
	cfg, err := config.Parse([]byte("[listen]\nsocket_dir = \"s\"\nhttp = \"0.0.0.0:0\"\nhttp_token = \"t\"\n"), "mux.toml", testutil.ShortDir(t))
	require.NoError(t, err)
	var log testutil.Buffer
	err = serve(t.Context(), cfg, daemonEnv{}, newLogger(cfg, &log))
	assert.EqualError(t, err, `[listen] http = "0.0.0.0:0" is not a loopback address; set http_allow_remote = true to serve beyond this machine`)
}
