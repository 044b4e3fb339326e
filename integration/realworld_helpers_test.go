package integration

// The real-world tier's harness: the npm packages in ./node (real MCP
// servers, and the TypeScript SDK whose clients the .mjs scripts there
// drive), and the Go side of those scripts. ./scripts/test installs the
// packages (npm ci) before it runs the tests; `go test -short` skips the
// tier.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// rwNodeDir is the npm project of the tier, relative to this package (go
// test runs in the package's folder).
const rwNodeDir = "node"

// rwScriptTimeout bounds one script run, and rwScriptTimeoutMs is what the
// script gives itself (it then prints an error line and exits), a bit less
// so that its own message is the one the test sees.
const (
	rwScriptTimeout   = 2 * time.Minute
	rwScriptTimeoutMs = 100000
)

// rwToken is the http_token of the tier's daemons.
const rwToken = "realworld-token"

// rwListen is the [listen] lines of a daemon with a web listener on a port
// of the system's choosing (the daemon logs its URL, see rwWebAddr) and a
// fixed token. Port 0 rather than a free port picked beforehand: nothing can
// take the port between the pick and the daemon's bind.
const rwListen = "http = \"127.0.0.1:0\"\nhttp_token = \"" + rwToken + "\""

// realWorld is what the tier found on this machine.
type realWorld struct {
	node     string   // the node executable
	nodeArgs []string // flags for every script run (the global WebSocket on Node < 22)
	dir      string   // integration/node, absolute
}

var (
	rwOnce  sync.Once
	rwFound *realWorld
	rwErr   error
)

// needRealWorld returns the tier's setup, skips under -short, and fails the
// test when node or the npm packages are missing: CI runs ./scripts/test,
// which installs them, so a missing package is an error, never a skip.
func needRealWorld(t *testing.T) *realWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the real-world tier runs real MCP servers under node")
	}
	rwOnce.Do(func() { rwFound, rwErr = findRealWorld() })
	if rwErr != nil {
		t.Fatal(rwErr)
	}
	return rwFound
}

func findRealWorld() (*realWorld, error) {
	const hint = "run ./scripts/test, which installs the npm packages"
	dir, err := filepath.Abs(rwNodeDir)
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not on PATH (%v): install Node 20 or newer, then %s", err, hint)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %v", node, err)
	}
	version := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if major < 20 {
		return nil, fmt.Errorf("node %s is too old: the tier needs Node 20 or newer", version)
	}
	rw := &realWorld{node: node, dir: dir}
	if major < 22 {
		rw.nodeArgs = []string{"--experimental-websocket"} // the SDK's WebSocketClientTransport uses the global WebSocket
	}

	// Every pinned package must be installed, at its pinned version.
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("%s/package.json: %v", dir, err)
	}
	for name, want := range pkg.Dependencies {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err != nil {
			return nil, fmt.Errorf("%s is not installed in %s/node_modules: %s", name, dir, hint)
		}
		var got struct {
			Version string `json:"version"`
		}
		json.Unmarshal(b, &got)
		if alias, ok := strings.CutPrefix(want, "npm:"); ok {
			// "npm:NAME@VERSION" installs NAME under another name.
			want = alias[strings.LastIndex(alias, "@")+1:]
		}
		if got.Version != want {
			return nil, fmt.Errorf("%s is %s in %s/node_modules, package.json pins %s: %s", name, got.Version, dir, want, hint)
		}
	}
	return rw, nil
}

// module is the absolute path of a file inside node_modules.
func (rw *realWorld) module(rel string) string {
	return filepath.Join(rw.dir, "node_modules", rel)
}

// The servers' entry points, as their packages' bin fields name them.
const (
	rwEverything = "@modelcontextprotocol/server-everything/dist/index.js"
	rwMemory     = "@modelcontextprotocol/server-memory/dist/index.js"
	rwFilesystem = "@modelcontextprotocol/server-filesystem/dist/index.js"
	rwThinking   = "@modelcontextprotocol/server-sequential-thinking/dist/index.js"
)

// rwURLElicitation declares URL-mode elicitation to the server, which
// mcpmux does not by default (it declares the plain shapes every SDK
// accepts): server-everything offers trigger-url-elicitation only to a
// client that declared it.
const rwURLElicitation = `upstream_capabilities = { sampling = {}, elicitation = { form = {}, url = {} } }`

// server is a [servers.NAME] table running a node package's entry point
// with args, plus extra keys, one per line.
func (rw *realWorld) server(name, entry string, args []string, extra ...string) string {
	quoted := []string{strconv.Quote(rw.module(entry))}
	for _, a := range args {
		quoted = append(quoted, strconv.Quote(a))
	}
	return fmt.Sprintf("[servers.%s]\ncommand = %q\nargs = [%s]\n%s\n",
		name, rw.node, strings.Join(quoted, ", "), strings.Join(extra, "\n"))
}

// connectTarget is a script target that spawns `mcpmux connect`.
func connectTarget(d *daemon, server string) map[string]any {
	return map[string]any{"kind": "connect", "mcpmux": bins.mcpmux, "config": d.path, "server": server}
}

// wsTarget is a script target on the daemon's WebSocket listener, with the
// token on the URL (the SDK's WebSocketClientTransport cannot set headers).
func wsTarget(d *daemon, server, token string) map[string]any {
	url := "ws://" + rwWebAddr(d) + "/servers/" + server
	if token != "" {
		url += "?token=" + token
	}
	return map[string]any{"kind": "ws", "url": url}
}

var rwWebURL = regexp.MustCompile(`url=ws://([^/\s]+)/servers/NAME`)

// rwWebAddr waits for the daemon to log its web listener's address.
func rwWebAddr(d *daemon) string {
	d.tb.Helper()
	var addr string
	testutil.Eventually(d.tb, readyTimeout, "the daemon logs its web listener", func() (bool, error) {
		if m := rwWebURL.FindStringSubmatch(d.log()); m != nil {
			addr = m[1]
			return true, nil
		}
		return false, nil
	})
	return addr
}

// scriptLine is one line a script prints on stdout.
type scriptLine struct {
	Checkpoint string          `json:"checkpoint"`
	Result     json.RawMessage `json:"result"`
	Error      *string         `json:"error"`
}

// runScript runs node/NAME.mjs with args (as JSON) and decodes its result
// into result. At each checkpoint the script waits: at(name) runs, then the
// script goes on. The script's stderr is logged if the test fails.
func (rw *realWorld) runScript(t *testing.T, script string, args map[string]any, result any, at func(checkpoint string)) {
	t.Helper()
	args["scriptTimeoutMs"] = rwScriptTimeoutMs
	argJSON, err := json.Marshal(args)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), rwScriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rw.node, append(append([]string{}, rw.nodeArgs...), filepath.Join(rw.dir, script), string(argJSON))...)
	cmd.Dir = rw.dir
	cmd.Env = os.Environ()
	if os.Getenv("GORACE") == "" {
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=50") // for the mcpmux connect it spawns; see mcpmux
	}
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cmd.Start())
	defer func() {
		if t.Failed() {
			t.Logf("stderr of %s:\n%s", script, stderr.String())
		}
	}()

	var last *scriptLine
	var junk bytes.Buffer
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l scriptLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			fmt.Fprintf(&junk, "%s\n", sc.Bytes())
			continue
		}
		if l.Checkpoint != "" {
			if at != nil {
				at(l.Checkpoint)
			}
			io.WriteString(stdin, "go\n")
			continue
		}
		last = &l
	}
	scanErr := sc.Err()
	stdin.Close()
	waitErr := cmd.Wait()
	t.Logf("%s ran for %v", script, time.Since(start).Round(time.Millisecond))
	require.NoError(t, ctx.Err(), "%s did not end within %v", script, rwScriptTimeout)
	require.NoError(t, scanErr, "reading the output of %s", script)
	require.Empty(t, junk.String(), "%s printed lines that are not its JSON lines", script)
	require.NotNil(t, last, "%s printed no result line (exit: %v)", script, waitErr)
	if last.Error != nil {
		t.Fatalf("%s failed: %s", script, *last.Error)
	}
	require.NoError(t, waitErr, "%s exited", script)
	require.NoError(t, json.Unmarshal(last.Result, result), "decode the result of %s: %s", script, last.Result)
}

// rwStatus is the part of `mcpmux status --json` the tier reads.
type rwStatus struct {
	Servers []struct {
		Name        string `json:"name"`
		State       string `json:"state"`
		Pid         int    `json:"pid"`
		Restarts    int    `json:"restarts"`
		Sessions    int    `json:"sessions"`
		SessionList []struct {
			Transport string `json:"transport"`
			Client    string `json:"client"`
		} `json:"session_list"`
	} `json:"servers"`
}

// rwServerStatus runs `mcpmux status --json` and returns one server's part.
func rwServerStatus(t *testing.T, d *daemon, name string) (pid, restarts int, clients map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
	require.NoError(t, err, "mcpmux status --json")
	var st rwStatus
	require.NoError(t, json.Unmarshal(out, &st), "status: %s", out)
	for _, s := range st.Servers {
		if s.Name == name {
			clients = make(map[string]string) // clientInfo.name -> transport
			for _, sess := range s.SessionList {
				clients[sess.Client] = sess.Transport
			}
			return s.Pid, s.Restarts, clients
		}
	}
	t.Fatalf("mcpmux status lists no server %s: %s", name, out)
	return 0, 0, nil
}

// rwCall is a CallToolResult as the scripts report it.
type rwCall struct {
	Text    string `json:"text"`
	IsError bool   `json:"isError"`
}

// rwInit is what a client's initialize got on the wire.
type rwInit struct {
	RequestID       json.RawMessage `json:"requestId"`
	ResponseID      json.RawMessage `json:"responseId"`
	ProtocolVersion string          `json:"protocolVersion"`
	ServerName      string          `json:"serverName"`
	Capabilities    map[string]any  `json:"capabilities"`
}

// rwProgress is one notifications/progress's params.
type rwProgress struct {
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total"`
	ProgressToken json.RawMessage `json:"progressToken"`
}

// checkProgress asserts that progress is exactly steps notifications, 1 to
// steps of steps, all under token.
func checkProgress(t *testing.T, who string, progress []rwProgress, token json.RawMessage, steps int) {
	t.Helper()
	if !assert.Len(t, progress, steps, "%s: progress notifications on the wire: %+v", who, progress) {
		return
	}
	for i, p := range progress {
		assert.JSONEq(t, string(token), string(p.ProgressToken), "%s: progress %d carries another token", who, i+1)
		assert.Equal(t, float64(i+1), p.Progress, "%s: progress %d", who, i+1)
		assert.Equal(t, float64(steps), p.Total, "%s: total of progress %d", who, i+1)
	}
}
