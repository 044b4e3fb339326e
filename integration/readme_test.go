package integration

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/integration/benchkit"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// The README's install and quick-start blocks, run as a new user pastes
// them: each is the fenced block after a <!-- readme-test: NAME --> marker,
// so that the README cannot say what does not work. Three things differ
// from a user's machine, and the test changes those and nothing else:
//   - `git clone` fetches the repository; here the block runs in this
//     checkout instead;
//   - `npx -y @modelcontextprotocol/server-memory` fetches the package;
//     here an npx on PATH runs the pinned copy in integration/node (and
//     keeps its graph in the test's folder);
//   - the config gets a socket_dir of the test's own, so that the daemon
//     never meets one of the machine's user.

// readmeBlocks returns the marked blocks of the README, by name.
func readmeBlocks(t *testing.T, root string) map[string]string {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)<!-- readme-test: ([a-z-]+) -->\n```[a-z]*\n(.*?)```").FindAllSubmatch(readme, -1) {
		blocks[string(m[1])] = string(m[2])
	}
	return blocks
}

// quickStart is a new user's machine: a home folder, an environment, and
// the npx that stands in for the registry's.
type quickStart struct {
	root, home string
	env        []string // for the install block
	pathEnv    []string // for the blocks after it: mcpmux installed on PATH
}

func newQuickStart(t *testing.T, rw *realWorld) *quickStart {
	root, err := benchkit.RepoRoot(t.Context())
	require.NoError(t, err)
	dir := testutil.ShortDir(t)
	q := &quickStart{root: root, home: filepath.Join(dir, "home")}
	shims := filepath.Join(dir, "shims")
	for _, d := range []string{q.home, shims} {
		require.NoError(t, os.Mkdir(d, 0o700))
	}
	npx := fmt.Sprintf(`#!/bin/sh
# npx for the README's quick start, offline: the pinned server-memory.
[ "$*" = "-y @modelcontextprotocol/server-memory" ] || { echo "test npx: unexpected arguments: $*" >&2; exit 2; }
MEMORY_FILE_PATH='%s' exec '%s' '%s'
`, filepath.Join(dir, "memory.jsonl"), rw.node, rw.module(rwMemory))
	require.NoError(t, os.WriteFile(filepath.Join(shims, "npx"), []byte(npx), 0o700))

	// The Go caches and settings stay where they are (a new home would
	// mean a cold build); the rest of the environment is the new user's.
	goEnv, err := exec.Command(bins.goTool, "env", "GOCACHE", "GOMODCACHE", "GOENV").Output()
	require.NoError(t, err)
	g := strings.Split(strings.TrimSpace(string(goEnv)), "\n")
	require.Len(t, g, 3, "go env: %s", goEnv)
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "PATH", "GOPATH", "GOBIN", "MCPMUX_CONFIG", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR":
		default:
			q.env = append(q.env, kv)
		}
	}
	// mcpmux takes the account's home folder before $HOME (a client may
	// start it without HOME), so the new user's state folder is named
	// outright: the run must not write to the account's own.
	q.env = append(q.env, "HOME="+q.home, "XDG_STATE_HOME="+filepath.Join(q.home, ".local", "state"),
		"GOCACHE="+g[0], "GOMODCACHE="+g[1], "GOENV="+g[2])
	path := shims + string(os.PathListSeparator) + os.Getenv("PATH")
	// The install block puts $(go env GOPATH)/bin first; GOPATH's default
	// is ~/go.
	q.pathEnv = append(append([]string{}, q.env...), "PATH="+filepath.Join(q.home, "go", "bin")+string(os.PathListSeparator)+path)
	q.env = append(q.env, "PATH="+path)
	return q
}

// run runs a block with bash in dir and returns its stdout.
func (q *quickStart) run(t *testing.T, name, dir, block string, env []string, within time.Duration) string {
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "the README's %s block:\n%s\nstderr:\n%s", name, block, stderr.String())
	return stdout.String()
}

// TestReadmeQuickStart: the README's install and quick-start blocks, in
// order, give one shared server-memory that answers two clients.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	q := newQuickStart(t, rw)
	blocks := readmeBlocks(t, q.root)

	// Install: the module path must be this module's.
	mod, err := os.ReadFile(filepath.Join(q.root, "go.mod"))
	require.NoError(t, err)
	module := strings.Fields(strings.SplitN(string(mod), "\n", 2)[0])[1]
	install := blocks["install"]
	clone := "git clone https://" + module + " && cd mcpmux\n"
	require.Contains(t, install, clone, "the README clones this module")
	require.Contains(t, install, "CGO_ENABLED=0 go install ./cmd/mcpmux", "the README installs the clone's command, static")
	install = strings.Replace(install, clone, "", 1)
	out := q.run(t, "install", q.root, install, q.env, 5*time.Minute)
	assert.Regexp(t, `(?m)^mcpmux \S+ \(`, out, "mcpmux --version, run from the PATH the block set")
	bin := filepath.Join(q.home, "go", "bin", "mcpmux")
	require.FileExists(t, bin, "go install put mcpmux where the README says")
	assertStatic(t, bin)

	// The config: no path of anyone's machine in it.
	config := blocks["config"]
	require.NotRegexp(t, `/home/|/Users/|/run/user/`, config, "the quick-start config works when pasted")
	q.run(t, "config", q.home, config, q.pathEnv, time.Minute)
	muxToml := filepath.Join(q.home, ".config", "mcpmux", "mux.toml")
	f, err := os.OpenFile(muxToml, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err, "the config block wrote the default config file")
	_, err = fmt.Fprintf(f, "\n[listen]\nsocket_dir = %q\n", filepath.Join(filepath.Dir(q.home), "s"))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	log := q.serve(t, blocks["serve"])
	before := q.status(t)

	out = q.run(t, "clients", q.home, blocks["clients"], q.pathEnv, 2*time.Minute)
	checkQuickStartClients(t, out)

	after := q.status(t)
	assert.Equal(t, before, after, "one memory process, the same before and after the clients")
	assert.Zero(t, after.Restarts, "memory never restarted")
	assert.Equal(t, 1, strings.Count(log.String(), `msg="server started" server=memory`), "the daemon started memory once:\n%s", log.String())
}

// serve starts the serve block (one command line) and waits for the log
// line the README says to wait for. The daemon gets SIGTERM at cleanup.
func (q *quickStart) serve(t *testing.T, block string) *testutil.Buffer {
	line := strings.TrimSpace(block)
	require.NotContains(t, line, "\n", "the serve block is one command")
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Dir, cmd.Env = q.home, q.pathEnv
	log := &testutil.Buffer{}
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // waited for at cleanup
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			assert.NoError(t, err, "mcpmux serve exits cleanly on SIGTERM; its log:\n%s", log.String())
		case <-time.After(stopTimeout):
			cmd.Process.Kill()
			<-exited
			t.Errorf("mcpmux serve did not exit within %v of SIGTERM", stopTimeout)
		}
	})
	testutil.Until(t, time.Minute, "the daemon logs server ready for memory", func() bool {
		return strings.Contains(log.String(), `msg="server ready" server=memory`)
	})
	return log
}

// quickStartServer is what status says of memory.
type quickStartServer struct {
	State    string `json:"state"`
	Pid      int    `json:"pid"`
	Restarts int    `json:"restarts"`
}

func (q *quickStart) status(t *testing.T) quickStartServer {
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(q.home, "go", "bin", "mcpmux"), "status", "--json")
	cmd.Dir, cmd.Env = q.home, q.pathEnv
	out, err := cmd.Output()
	require.NoError(t, err, "mcpmux status --json")
	var st struct {
		Servers []struct {
			Name string `json:"name"`
			quickStartServer
		} `json:"servers"`
	}
	require.NoError(t, json.Unmarshal(out, &st), "status: %s", out)
	require.Len(t, st.Servers, 1, "status: %s", out)
	require.Equal(t, "memory", st.Servers[0].Name)
	require.Equal(t, "ready", st.Servers[0].State, "status: %s", out)
	return st.Servers[0].quickStartServer
}

// checkQuickStartClients reads what the clients block printed: each
// connect's two answers, then status's table.
func checkQuickStartClients(t *testing.T, out string) {
	var answers []*jsonrpc.Message
	var table []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "{") {
			table = append(table, line)
			continue
		}
		m, err := jsonrpc.Parse([]byte(line))
		require.NoError(t, err, "a connect printed a line that is not JSON-RPC: %q", line)
		answers = append(answers, m)
	}
	require.Len(t, answers, 4, "two answers for each client:\n%s", out)
	for i, m := range answers {
		assert.Equal(t, [2]any{jsonrpc.KindResult, []string{"1", "2"}[i%2]}, [2]any{m.Kind, string(m.ID)}, "answer %d: %s", i, m.Frame)
	}
	assert.Contains(t, string(answers[1].Result), `mcpmux`, "the first client created the entity")
	assert.Contains(t, string(answers[3].Result), `shares one server among many clients`, "the second client reads what the first stored")
	var memory string
	for _, l := range table {
		if strings.HasPrefix(l, "memory ") {
			memory = strings.Join(strings.Fields(l), " ")
			break // the table's line, not the stderr lines' heading
		}
	}
	assert.Regexp(t, `^memory ready \d+ `, memory, "status's line for memory:\n%s", strings.Join(table, "\n"))
}

// assertStatic: the binary at path asks for no dynamic loader, as the
// README says of its install block.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		return // not ELF (macOS): its binaries link the system's libraries anyway
	}
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s is dynamically linked: the README's install block builds without cgo", path)
	}
}
