package doctor

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/mux"
)

// setup is a home folder and a config file in it, all under one short
// temporary folder, and what Run is given to check them.
type setup struct {
	home, path string
	in         Input
}

// newSetup writes the config text to home/mux.toml. Run looks for other
// daemons in dirs only, never in this machine's real folders.
func newSetup(t *testing.T, text string, dirs ...string) *setup {
	home := testutil.ShortDir(t)
	path := filepath.Join(home, "mux.toml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	vars := map[string]string{"HOME": home, "PATH": os.Getenv("PATH")}
	in := Input{Config: path, Getenv: func(k string) string { return vars[k] }, GOOS: runtime.GOOS, UID: os.Getuid(), Cwd: home, Dirs: dirs, Version: "v-test"}
	return &setup{home: home, path: path, in: in}
}

// doctor runs the checks and returns their report and its error.
func (s *setup) doctor(t *testing.T) (Report, error) {
	r := Run(t.Context(), s.in)
	return r, r.Err()
}

// lineWith returns, as printed, the first finding of r with the mark whose
// text contains text, or fails the test.
func lineWith(t *testing.T, r Report, m Mark, text string) string {
	t.Helper()
	for _, f := range r {
		if f.Mark == m && strings.Contains(f.Text, text) {
			return f.String()
		}
	}
	t.Fatalf("no %q finding containing %q in:\n%s", m, text, r)
	return ""
}

// attention is the findings that say warn or fail, as printed.
func attention(r Report) []string {
	var bad []string
	for _, f := range r {
		if f.Mark == Warn || f.Mark == Fail {
			bad = append(bad, f.String())
		}
	}
	return bad
}

// TestDoctorBrokenConfig: a config that does not load is reported where
// it goes wrong (file, line, key), and doctor still looks at the socket
// folder the file names.
func TestDoctorBrokenConfig(t *testing.T) {
	s := newSetup(t, "[listen]\nsocket_dir = \"s\"\n[servers.x]\ncommand = 5\n")
	out, err := s.doctor(t)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	lineWith(t, out, Fail, "config: "+s.path+":4: servers.x.command: must be a string (got an integer)")
	lineWith(t, out, Note, "socket folder ~/s does not exist yet")
	lineWith(t, out, Note, "daemon: none serves ~/s")
}

// TestDoctorSocketFolderNotPrivate: a socket folder open to others is a
// failure, with the fix, and nothing is sent to it.
func TestDoctorSocketFolderNotPrivate(t *testing.T) {
	s := newSetup(t, "[listen]\nsocket_dir = \"s\"\n[servers.x]\ncommand = \"cat\"\n")
	dir := filepath.Join(s.home, "s")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o755))
	out, err := s.doctor(t)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	lineWith(t, out, Fail, "socket dir "+dir+" has mode 0755 (owner uid ")
	assert.Contains(t, lineWith(t, out, Fail, "socket dir "), "chmod 700 it", "the fix")
	lineWith(t, out, Note, "daemon: not asked")
}

// TestDoctorWithoutDaemon: what needs attention when nothing runs: no
// config file, a config with no servers, auto-start off; and what does not
// (auto-start on: the first connect starts a daemon).
func TestDoctorWithoutDaemon(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // the lines needing attention, each by its start
	}{
		{"auto-start on", "[listen]\nsocket_dir = \"s\"\n[servers.x]\ncommand = \"cat\"\n", nil},
		{"auto-start off", "[daemon]\nautostart = false\n[listen]\nsocket_dir = \"s\"\n[servers.x]\ncommand = \"cat\"\n",
			[]string{"warn  daemon: none serves ~/s, and auto-start is off (autostart = false): start one with `mcpmux serve --config "}},
		{"no servers", "[listen]\nsocket_dir = \"s\"\n", []string{"warn  config ~/mux.toml has no servers: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t, tc.text)
			out, err := s.doctor(t)
			bad := attention(out)
			require.Len(t, bad, len(tc.want), "doctor:\n%s", out)
			for i, want := range tc.want {
				assert.True(t, strings.HasPrefix(bad[i], want), "line %d: %q", i, bad[i])
			}
			if tc.want == nil {
				assert.NoError(t, err)
				lineWith(t, out, Note, "daemon: none serves ~/s; the first `mcpmux connect` starts one")
			} else {
				assert.Error(t, err)
			}
		})
	}
	t.Run("no config file", func(t *testing.T) {
		s := newSetup(t, "")
		require.NoError(t, os.Remove(s.path))
		out, err := s.doctor(t)
		assert.Error(t, err)
		lineWith(t, out, Fail, "config ~/mux.toml does not exist: ")
	})
}

// TestDoctorEditors: the editors' files are read (never written) for
// entries that run `mcpmux connect`: a name the config lacks and an mcpmux
// the PATH cannot find need attention; another config, or servers started
// directly, are noted.
func TestDoctorEditors(t *testing.T) {
	s := newSetup(t, "[listen]\nsocket_dir = \"s\"\n[servers.memory]\ncommand = \"cat\"\n")
	s.in.Cwd = filepath.Join(s.home, "project")
	require.NoError(t, os.MkdirAll(filepath.Join(s.in.Cwd, ".vscode"), 0o700))
	vscode := filepath.Join(s.in.Cwd, ".vscode", "mcp.json")
	text := `{
		// comments, as VS Code allows
		"servers": {
			"memory": {"type": "stdio", "command": "mcpmux-not-on-path/../mcpmux", "args": ["connect", "--config=` + s.path + `", "memory"]},
			"typo": {"command": "mcpmux", "args": ["connect", "--config", "` + s.path + `", "--drain", "1s", "memroy"]},
			"theirs": {"command": "mcpmux", "args": ["connect", "memory"], "env": {"MCPMUX_CONFIG": "/elsewhere/mux.toml"}},
			"direct": {"command": "npx", "args": ["-y", "some-server"]},
		}
	}`
	require.NoError(t, os.WriteFile(vscode, []byte(text), 0o600))
	s.in.Getenv = func(k string) string { return map[string]string{"HOME": s.home, "PATH": "/nonexistent"}[k] }

	out, err := s.doctor(t)
	assert.Error(t, err)
	where := "VS Code ~/project/.vscode/mcp.json: "
	assert.Equal(t, []string{
		"warn  " + where + `"typo" runs ` + "`mcpmux connect memroy`" + `, and the config has no server memroy (it has: memory)`,
		"warn  " + where + `starts "mcpmux" by name, and this PATH has none: install mcpmux on PATH, or use its absolute path (` + "`mcpmux client-config NAME --for vscode`" + ` prints it)`,
	}, attention(out), "doctor:\n%s", out)
	lineWith(t, out, OK, where+"memory through mcpmux")
	lineWith(t, out, Note, where+`"theirs" uses another config, /elsewhere/mux.toml`)
	lineWith(t, out, Note, where+"started directly, not through mcpmux: direct")
	after, err := os.ReadFile(vscode)
	require.NoError(t, err)
	assert.Equal(t, text, string(after), "the editor's file is left as it was")
}

// TestDoctorServerStates: each state a server can be in gets its mark,
// and the ones that do not stay up get their last exit and a hint.
func TestDoctorServerStates(t *testing.T) {
	for _, tc := range []struct {
		st   mux.Status
		want string
	}{
		{mux.Status{Name: "a", State: mux.StateReady, Pid: 7, Uptime: "1m", Sessions: 1}, "ok    server a: ready, pid 7, up 1m, 1 session"},
		{mux.Status{Name: "a", State: mux.StateReady, Pid: 7, Uptime: "1m", Restarts: 2, LastExit: "exit status 1"}, "ok    server a: ready, pid 7, up 1m, 0 sessions, restarted 2 times (last exit: exit status 1)"},
		{mux.Status{Name: "a", State: mux.StateReady, Pid: 7, Uptime: "1m", Sessions: 2, Serialized: true}, "ok    server a: ready, pid 7, up 1m, 2 sessions\nnote  server a: serialized as a whole: its sessions' interactive requests (tools/call, prompts/get, resources/read, completion/complete) take turns, one at a time, so that its sampling and elicitation requests reach the right session; server_requests = \"auto\" makes only the requests seen asking take turns"},
		{mux.Status{Name: "a", State: mux.StateIdle}, `ok    server a: idle: not running until a session wants it (start = "lazy", or stopped after idle_timeout)`},
		{mux.Status{Name: "a", State: mux.StateStarting}, "note  server a: starting; sessions wait for it up to start_timeout (a slow starter: see `mcpmux logs a`)"},
		{mux.Status{Name: "a", State: mux.StateBackoff, Restarts: 1, LastExit: "initialize: server exited (signal: killed (junk_output))"},
			"warn  server a: exited, and is restarted after a pause (1 restart so far; last exit: initialize: server exited (signal: killed (junk_output))); it printed lines that are not JSON-RPC on its stdout, more than max_junk_lines in a row: make it log to stderr, or raise max_junk_lines for a startup banner; `mcpmux logs a` has the rest"},
		{mux.Status{Name: "a", State: mux.StateFailed, LastExit: `start a: command "npx" not found in PATH (/usr/bin:/bin)`, Stderr: []string{"x\n"}},
			"fail  server a: failed: it crashed too often and is not restarted until `mcpmux restart a` (last exit: start a: command \"npx\" not found in PATH (/usr/bin:/bin)); the daemon's PATH has no such command: write command as an absolute path, or start the daemon where PATH has it (a service keeps the PATH it was installed with; an auto-started daemon has the editor's); its last stderr line: \"x\"; `mcpmux logs a` has the rest"},
		{mux.Status{Name: "a", State: "isolated", Sessions: 2}, `ok    server a: a process of its own for each session (share = "isolated"): 2 sessions`},
		{mux.Status{Name: "a", State: "project", Instances: []mux.InstanceStatus{{Project: "/p", State: mux.StateReady}, {Project: "/q", State: mux.StateFailed, LastExit: "exit status 2"}}},
			"ok    server a: one process per project (share = \"project\"): 2 running\nfail  server a, project /q: failed (last exit: exit status 2); `mcpmux logs a` has the rest"},
	} {
		d := &checkup{in: Input{Getenv: func(string) string { return "" }}}
		d.checkServer(tc.st)
		assert.Equal(t, tc.want+"\n", d.r.String(), "state %s", tc.st.State)
	}
}
