package integration

// The MCP Inspector's CLI (the npm package @modelcontextprotocol/inspector,
// pinned in ./node) as the client: what a user types to poke at a shared
// server, run against server-everything behind mcpmux, over `mcpmux connect`
// and over Streamable HTTP. Each run is one short-lived session: connect,
// one method, close.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// rwInspector is the Inspector's command, the file its package's bin
// mcp-inspector names. It is run with the node on PATH (the Node 20 of the
// tier), never through node_modules/.bin, which also holds a node.
const rwInspector = "@modelcontextprotocol/inspector/cli/build/cli.js"

// inspectorTimeout bounds one Inspector run; one takes about 2 s here.
const inspectorTimeout = 60 * time.Second

// inspectorRun is the outcome of one Inspector run.
type inspectorRun struct {
	stdout, stderr string
	err            error // from Wait: nil, or the non-zero exit
	elapsed        time.Duration
}

// runInspector runs `mcp-inspector --cli FLAGS... --method METHOD --
// TARGET...`, where target is a command with its arguments or a URL.
//
// The target goes after `--` because the outer mcp-inspector has --config
// and --server options of its own (an Inspector config file) and would take
// `mcpmux connect --config` for them. It drops the `--` when it starts the
// inner CLI, so there the target follows the flags directly: --method comes
// last because --tool-arg is variadic and would swallow the target.
//
// The Inspector runs in a process group of its own (it is a wrapper node
// that starts the CLI's node, which starts `mcpmux connect`), and a timeout
// kills the whole group, so that nothing it started outlives the test.
func (rw *realWorld) runInspector(t *testing.T, target []string, method string, flags ...string) inspectorRun {
	t.Helper()
	args := append([]string{rw.module(rwInspector), "--cli"}, flags...)
	args = append(append(append(args, "--method", method), "--"), target...)
	env := os.Environ()
	if os.Getenv("GORACE") == "" {
		env = append(env, "GORACE=atexit_sleep_ms=50") // for the mcpmux connect it spawns; see mcpmux
	}
	return rw.runInspectorCmd(t, "mcp-inspector", rw.node, env, args, slices.Concat(flags, []string{"--method", method}))
}

// runInspectorCmd runs an Inspector's node with args and env as its whole
// environment, in a process group of its own (it is a wrapper node that
// starts the CLI's node, which starts `mcpmux connect`) that a timeout
// kills whole, so that nothing it started outlives the test. label and
// shown name the run in the test's log.
func (rw *realWorld) runInspectorCmd(t *testing.T, label, node string, env, args, shown []string) inspectorRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), inspectorTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = rw.dir
	cmd.Env = env
	var stdout, stderr testutil.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The leader is not reaped yet (Wait is still running), so the
		// group id is still ours.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := inspectorRun{stdout: stdout.String(), stderr: stderr.String(), err: err, elapsed: time.Since(start)}
	t.Logf("%s %s: %v", label, strings.Join(shown, " "), r.elapsed.Round(time.Millisecond))
	require.NoError(t, ctx.Err(), "%s did not exit within %v; stderr: %s", label, inspectorTimeout, r.stderr)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", label, err)
	}
	return r
}

// inspect is runInspector for a run that must succeed: it exits 0 and its
// stdout is exactly one JSON value, the method's result, which it returns.
func (rw *realWorld) inspect(t *testing.T, target []string, method string, flags ...string) string {
	t.Helper()
	r := rw.runInspector(t, target, method, flags...)
	require.NoError(t, r.err, "mcp-inspector --method %s %v failed; stderr:\n%s", method, flags, r.stderr)
	out := strings.TrimSpace(r.stdout)
	require.True(t, json.Valid([]byte(out)), "stdout of mcp-inspector --method %s is not one JSON value:\n%s", method, r.stdout)
	return out
}

// inspectorSessions is server name's sessions as `mcpmux status --json`
// counts and lists them, each as "TRANSPORT CLIENT", sorted, with the
// server's pid and restarts.
func inspectorSessions(t *testing.T, d *daemon, name string) (pid, restarts, count int, sessions []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
	require.NoError(t, err, "mcpmux status --json")
	var st rwStatus
	require.NoError(t, json.Unmarshal(out, &st), "status: %s", out)
	for _, s := range st.Servers {
		if s.Name == name {
			sessions = []string{}
			for _, sess := range s.SessionList {
				sessions = append(sessions, sess.Transport+" "+sess.Client)
			}
			slices.Sort(sessions)
			return s.Pid, s.Restarts, s.Sessions, sessions
		}
	}
	t.Fatalf("mcpmux status lists no server %s: %s", name, out)
	return 0, 0, 0, nil
}

// The daemon's debug log of a session's start and of its initialize.
var (
	sessionAttached    = regexp.MustCompile(`msg="session attached" server=everything session=(\d+) transport=(\S+)`)
	sessionInitialized = regexp.MustCompile(`msg="session initialized" server=everything session=(\d+) .*\\"name\\":\\"inspector-cli\\"`)
)

// inspectorTransports lists, in the order they started, the transports of
// the sessions of server mcp whose client called itself inspector-cli.
func inspectorTransports(log string) []string {
	transport := map[string]string{}
	for _, m := range sessionAttached.FindAllStringSubmatch(log, -1) {
		transport[m[1]] = m[2]
	}
	out := []string{}
	for _, m := range sessionInitialized.FindAllStringSubmatch(log, -1) {
		out = append(out, transport[m[1]])
	}
	return out
}

// TestInspectorCLI: the MCP Inspector's CLI lists server-everything's tools
// and calls its echo, twice over `mcpmux connect` (the Inspector spawns it
// as its stdio server) and twice over Streamable HTTP with the token on the
// URL; all four runs are sessions of one server process.
//
// The URL is /servers/everything/mcp, mcpmux's alias of /servers/everything,
// for a limit of Inspector 0.15.0: its HTTP transport posts to the URL as
// given only if the path ends in /mcp, and otherwise to /mcp at the root,
// dropping the path and the query (token and all). It has no option to
// send a header either, so the Authorization: Bearer form of the token is
// left to TestRealWorldStreamableHTTP.
func TestInspectorCLI(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	d := startDaemon(t, rw.server("everything", rwEverything, []string{"stdio"}, rwFast, rwURLElicitation), rwListen)
	url := "http://" + rwWebAddr(d) + "/servers/everything/mcp"

	// check runs tools/list and echo over target, and checks their results
	// whole: the tools are server-everything's, and the echo comes back
	// exactly, with nothing else in the result.
	var toolsSeen [][]string
	check := func(t *testing.T, kind string, target []string, flags ...string) {
		var list struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		out := rw.inspect(t, target, "tools/list", flags...)
		require.NoError(t, json.Unmarshal([]byte(out), &list), "tools/list over %s: %s", kind, out)
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		assert.Subset(t, names, everythingTools, "tools/list over %s", kind)
		assert.NotContains(t, names, "get-roots-list", "no roots configured: mcpmux declares none, so the server has no roots tool")
		toolsSeen = append(toolsSeen, names)

		message := "hello from the inspector over " + kind
		out = rw.inspect(t, target, "tools/call", slices.Concat(flags, []string{"--tool-arg", "message=" + message, "--tool-name", "echo"})...)
		assert.JSONEq(t, `{"content":[{"type":"text","text":"Echo: `+message+`"}]}`, out, "tools/call echo over %s", kind)
	}

	// pid is the server's process, as the status shows it after the first
	// run; every later look at the status must show the same one.
	var pid int
	samePid := func(t *testing.T, got, restarts int) {
		if pid == 0 {
			pid = got
		}
		assert.NotZero(t, got, "the server is not running")
		assert.Equal(t, pid, got, "the server's pid changed: a second process served an Inspector session")
		assert.Zero(t, restarts, "the server restarted")
	}

	t.Run("connect", func(t *testing.T) {
		check(t, "connect", []string{bins.mcpmux, "connect", "--config", d.path, "everything"})
		// The Inspector closed its bridge's stdin before it exited, so the
		// bridge's session ends too; the daemon sees that a moment later.
		var got, restarts int
		testutil.Eventually(t, readyTimeout, "the sessions of the Inspector's bridges end", func() (bool, error) {
			var count int
			var sessions []string
			got, restarts, count, sessions = inspectorSessions(t, d, "everything")
			return count == 0 && len(sessions) == 0, nil
		})
		samePid(t, got, restarts)
	})

	t.Run("streamable http", func(t *testing.T) {
		check(t, "streamable http", []string{url + "?token=" + rwToken}, "--transport", "http")
		// The Inspector closes its HTTP transport without a DELETE, so both
		// HTTP sessions stay in the daemon until they idle out (30 min).
		got, restarts, count, sessions := inspectorSessions(t, d, "everything")
		samePid(t, got, restarts)
		assert.Equal(t, []string{"http inspector-cli", "http inspector-cli"}, sessions, "the daemon's HTTP sessions")
		assert.Equal(t, len(sessions), count, "the status's count of sessions against its list")

		// Without the right token the Inspector gets no session: a
		// non-zero exit, the daemon's 401 (its JSON-RPC body) in its
		// message, nothing on stdout.
		r := rw.runInspector(t, []string{url + "?token=not-the-token"}, "tools/list", "--transport", "http")
		assert.Error(t, r.err, "mcp-inspector with a wrong token exited 0; stdout:\n%s", r.stdout)
		assert.Contains(t, r.stderr, "missing or wrong token")
		assert.Contains(t, r.stderr, `"reason":"unauthorized"`)
		assert.Empty(t, r.stdout)
		_, _, count, sessions = inspectorSessions(t, d, "everything")
		assert.Equal(t, []string{"http inspector-cli", "http inspector-cli"}, sessions, "sessions after the refused run")
		assert.Equal(t, 2, count)
	})

	// Both transports saw the one server's tools.
	if assert.Len(t, toolsSeen, 2) {
		assert.ElementsMatch(t, toolsSeen[0], toolsSeen[1], "tools over connect and over Streamable HTTP")
	}
	// Each Inspector run was one session, over the transport it was meant
	// to use, in order; all of them on the one process the daemon started.
	testutil.Eventually(t, readyTimeout, "the daemon logs the Inspector's four sessions", func() (bool, error) {
		return len(inspectorTransports(d.log())) >= 4, nil
	})
	assert.Equal(t, []string{"unix", "unix", "http", "http"}, inspectorTransports(d.log()), "transports of the inspector-cli sessions, in order")
	assert.Equal(t, pid, oneProcess(t, d, "everything"))
}
