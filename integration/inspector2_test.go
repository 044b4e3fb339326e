package integration

// MCP Inspector 2.12.0 (pinned in ./node as inspector-next) as the client.
// It needs Node 22.19 or newer, so it runs under the conformance tier's
// node (findNode22). It starts its stdio server with a reduced environment
// (HOME, LOGNAME, PATH, SHELL, TERM, USER: the TypeScript SDK's default),
// so MCPMUX_CONFIG never reaches `mcpmux connect`, and it takes --config as
// an option of its own. A user whose config is outside the default place
// therefore configures just `mcpmux connect NAME`, and connect reaches the
// daemon this user runs in the default socket folder.

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	muxdaemon "github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// rwInspector2 is Inspector 2.12.0's launcher, its package's bin.
const rwInspector2 = "inspector-next/clients/launcher/build/index.js"

// runInspector2 runs `mcp-inspector --cli FLAGS... --method METHOD
// TARGET...` under node22 with env as its whole environment, in a process
// group of its own that a timeout kills whole (see runInspector).
func (rw *realWorld) runInspector2(t *testing.T, node string, env, target []string, method string, flags ...string) inspectorRun {
	t.Helper()
	args := append([]string{rw.module(rwInspector2), "--cli"}, flags...)
	args = append(append(args, "--method", method), target...)
	return rw.runInspectorCmd(t, "mcp-inspector 2.12.0", node, env, args, slices.Concat(flags, []string{"--method", method}))
}

// inspect2 is runInspector2 for a run that must succeed: exit 0 and one
// JSON value on stdout, which it returns.
func (rw *realWorld) inspect2(t *testing.T, node string, env, target []string, method string, flags ...string) (stdout, stderr string) {
	t.Helper()
	r := rw.runInspector2(t, node, env, target, method, flags...)
	require.NoError(t, r.err, "mcp-inspector 2.12.0 --method %s %v failed; stderr:\n%s", method, flags, r.stderr)
	out := strings.TrimSpace(r.stdout)
	require.True(t, json.Valid([]byte(out)), "stdout of mcp-inspector 2.12.0 --method %s is not one JSON value:\n%s", method, r.stdout)
	return out, r.stderr
}

// inspector2Check runs tools/list and echo through the Inspector 2.12.0
// and checks both results whole. The Inspector passes its stdio server's
// stderr on: each run's stderr must contain want (if not empty).
func (rw *realWorld) inspector2Check(t *testing.T, node string, env, target []string, kind, want string, flags ...string) {
	t.Helper()
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	out, stderr := rw.inspect2(t, node, env, target, "tools/list", flags...)
	assert.Contains(t, stderr, want, "stderr of tools/list over %s", kind)
	require.NoError(t, json.Unmarshal([]byte(out), &list), "tools/list over %s: %s", kind, out)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	assert.Subset(t, names, everythingTools, "tools/list over %s", kind)

	message := "hello from inspector 2.12.0 over " + kind
	out, stderr = rw.inspect2(t, node, env, target, "tools/call", slices.Concat(flags, []string{"--tool-name", "echo", "--tool-arg", "message=" + message})...)
	assert.Contains(t, stderr, want, "stderr of tools/call over %s", kind)
	assert.JSONEq(t, `{"content":[{"type":"text","text":"Echo: `+message+`"}]}`, out, "tools/call echo over %s", kind)
}

// socketDirLine is the socket_dir line writeConfig writes.
var socketDirLine = regexp.MustCompile(`(?m)^socket_dir = .*$`)

// startDefaultDaemon serves servers from a config outside the default place
// (a temporary folder) in the default socket folder, where connect looks
// when it has no config. That folder is this user's, not the test's: if a
// daemon serves there already (the user's own, or another test run's), the
// test is skipped, naming it, since a second daemon there is refused.
func startDefaultDaemon(t *testing.T, servers, listen string) *daemon {
	t.Helper()
	dir, note, err := socket.DefaultDir(os.Getuid(), func() string { return os.Getenv("HOME") })
	require.NoError(t, err)
	require.Empty(t, note, "the default socket folder %s", dir)
	control := filepath.Join(dir, muxdaemon.ControlSocket)
	if c, err := net.DialTimeout("unix", control, ioTimeout); err == nil {
		c.Close()
		t.Skipf("a daemon already serves in the default socket folder %s: this test needs that folder for its own daemon", dir)
	}
	cfg := writeConfig(t, servers, listen)
	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg.path, socketDirLine.ReplaceAll(text, nil), 0o600))
	cfg.sockets = dir
	withState(t, cfg)
	return serveConfig(t, cfg)
}

// TestRealWorldInspector2: the Inspector 2.12.0 CLI, configured as a user
// does (`mcpmux connect everything`, nothing else), lists
// server-everything's tools and calls its echo through mcpmux, although
// the daemon's config is outside the default place and the Inspector hands
// its child only its reduced environment (HOME is an empty folder, so there
// is no config in the default place either): connect finds the daemon in
// the default socket folder.
func TestRealWorldInspector2(t *testing.T) {
	t.Parallel() // no other test serves in the default socket folder
	rw := needRealWorld(t)
	node, err := findNode22(rw.dir)
	require.NoError(t, err, "Inspector 2.12.0 needs Node 22.19 or newer")
	_, err = os.Stat(rw.module(rwInspector2))
	require.NoError(t, err, "Inspector 2.12.0 (inspector-next) is not installed: run ./scripts/test, which installs the npm packages")
	d := startDefaultDaemon(t, rw.server("everything", rwEverything, []string{"stdio"}, rwFast, rwURLElicitation), rwListen)

	home := testutil.ShortDir(t)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	t.Run("connect", func(t *testing.T) {
		// connect says which daemon it uses in place of the missing config.
		warning := "using the daemon that serves in " + d.sockets + " (pid "
		rw.inspector2Check(t, node, env, []string{bins.mcpmux, "connect", "everything"}, "connect", warning)
	})
	assert.NoFileExists(t, filepath.Join(home, ".config", "mcpmux", "mux.toml"), "the Inspector's HOME holds no config")
	// Each run was one session of the daemon's over its unix socket.
	testutil.Eventually(t, readyTimeout, "the daemon logs the Inspector's sessions", func() (bool, error) {
		return len(inspectorTransports(d.log())) >= 2, nil
	})
	assert.Equal(t, []string{"unix", "unix"}, inspectorTransports(d.log()), "transports of the inspector-cli sessions, in order")
	oneProcess(t, d, "everything")
}
