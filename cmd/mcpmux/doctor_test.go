package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/mux"
)

// doctorSetup is a home folder, a config file in it and the socket
// folders doctor looks in, all under one short temporary folder.
type doctorSetup struct {
	home, path string
	env        doctorEnv
}

// newDoctorSetup writes the config text to home/mux.toml. Doctor looks for
// other daemons in dirs only, never in this machine's real folders.
func newDoctorSetup(t *testing.T, text string, dirs ...string) *doctorSetup {
	home := testutil.ShortDir(t)
	path := filepath.Join(home, "mux.toml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	vars := map[string]string{"HOME": home, "PATH": os.Getenv("PATH")}
	env := doctorEnv{
		setupEnv:   setupEnv{getenv: func(k string) string { return vars[k] }, uid: os.Getuid(), goos: runtime.GOOS},
		cwd:        home,
		socketDirs: func() []string { return dirs },
	}
	return &doctorSetup{home: home, path: path, env: env}
}

// doctor runs `mcpmux doctor --config PATH` and returns what it printed.
func (s *doctorSetup) doctor(t *testing.T) (string, error) {
	cmd := newDoctorCmdWith(s.env)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--config", s.path})
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// serveInProcess runs a daemon for cfg until the test ends (or stop).
func serveInProcess(t *testing.T, cfg *config.Config) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var log testutil.Buffer
	go func() {
		done <- serve(ctx, cfg, daemonEnv{environ: []string{"PATH=" + os.Getenv("PATH")}, stderr: &log}, newLogger(cfg, &log))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "serve; its log:\n%s", log.String())
			case <-time.After(10 * time.Second):
				t.Errorf("serve did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	testutil.Eventually(t, 10*time.Second, "the daemon answers", func() (bool, error) {
		_, err := askStatus(t.Context(), cfg.Listen.SocketDir)
		return err == nil, err
	})
	return stop
}

// waitForState waits until the daemon on dir reports server name in state.
func waitForState(t *testing.T, dir, name string, want mux.State) {
	testutil.Eventually(t, 20*time.Second, "server "+name+" is "+string(want), func() (bool, error) {
		st, err := askStatus(t.Context(), dir)
		if err != nil {
			return false, err
		}
		for _, s := range st.Servers {
			if s.Name == name {
				return s.State == want, nil
			}
		}
		return false, nil
	})
}

// lineWith returns the first line of out that starts with the mark and
// contains text, or fails the test.
func lineWith(t *testing.T, out string, m mark, text string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, string(m)+" ") && strings.Contains(l, text) {
			return l
		}
	}
	t.Fatalf("no %q line containing %q in:\n%s", m, text, out)
	return ""
}

// attention is the lines that say warn or fail.
func attention(out string) []string {
	var bad []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "warn ") || strings.HasPrefix(l, "fail ") {
			bad = append(bad, l)
		}
	}
	return bad
}

// TestDoctorAllIsWell: a daemon that serves this config with a ready
// server, a private socket folder, an editor that reaches the server
// through mcpmux: every line is ok or note, and doctor says all is well.
func TestDoctorAllIsWell(t *testing.T) {
	s := newDoctorSetup(t, "[listen]\nsocket_dir = \"s\"\n"+fakeServerTable("memory", "serve"))
	cfg, err := config.Load(s.path)
	require.NoError(t, err)
	s.env.socketDirs = func() []string { return []string{cfg.Listen.SocketDir, filepath.Join(s.home, "nothing-here")} }
	serveInProcess(t, cfg)
	waitForState(t, cfg.Listen.SocketDir, "memory", mux.StateReady)

	stub := filepath.Join(s.home, "bin", "mcpmux")
	require.NoError(t, os.MkdirAll(filepath.Dir(stub), 0o700))
	require.NoError(t, os.WriteFile(stub, []byte("#!/bin/sh\n"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(s.home, ".cursor"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(s.home, ".cursor", "mcp.json"), []byte(`{"mcpServers": {
		"memory": {"command": "`+stub+`", "args": ["connect", "--config", "`+s.path+`", "memory"]},
		"web": {"url": "http://127.0.0.1:1/mcp"}
	}}`), 0o600))

	out, err := s.doctor(t)
	t.Logf("doctor:\n%s", out)
	require.NoError(t, err, "doctor:\n%s", out)
	assert.Empty(t, attention(out), "nothing needs attention:\n%s", out)
	assert.True(t, strings.HasSuffix(out, "\nall is well\n"), "doctor ends saying so:\n%s", out)
	lineWith(t, out, markOK, "config ~/mux.toml: 1 server: memory")
	lineWith(t, out, markOK, "socket folder ~/s: yours, mode 0700")
	lineWith(t, out, markOK, "daemon: pid ")
	assert.Contains(t, lineWith(t, out, markOK, "daemon: pid "), "on ~/s, mcpmux "+mcpmuxVersion()+", up ", "the daemon's line")
	assert.True(t, strings.HasSuffix(lineWith(t, out, markOK, "daemon: pid "), ", config ~/mux.toml"), "the daemon's config file")
	lineWith(t, out, markOK, "server memory: ready, pid ")
	lineWith(t, out, markOK, "Cursor ~/.cursor/mcp.json: memory through mcpmux")
}

// TestDoctorBrokenConfig: a config that does not load is reported where
// it goes wrong (file, line, key), and doctor still looks at the socket
// folder the file names.
func TestDoctorBrokenConfig(t *testing.T) {
	s := newDoctorSetup(t, "[listen]\nsocket_dir = \"s\"\n[servers.x]\ncommand = 5\n")
	out, err := s.doctor(t)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	lineWith(t, out, markFail, "config: "+s.path+":4: servers.x.command: must be a string (got an integer)")
	lineWith(t, out, markNote, "socket folder ~/s does not exist yet")
	lineWith(t, out, markNote, "daemon: none serves ~/s")
}

// TestDoctorSocketFolderNotPrivate: a socket folder open to others is a
// failure, with the fix, and nothing is sent to it.
func TestDoctorSocketFolderNotPrivate(t *testing.T) {
	s := newDoctorSetup(t, "[listen]\nsocket_dir = \"s\"\n[servers.x]\ncommand = \"cat\"\n")
	dir := filepath.Join(s.home, "s")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o755))
	out, err := s.doctor(t)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	lineWith(t, out, markFail, "socket dir "+dir+" has mode 0755 (owner uid ")
	assert.Contains(t, lineWith(t, out, markFail, "socket dir "), "chmod 700 it", "the fix")
	lineWith(t, out, markNote, "daemon: not asked")
}

// TestDoctorSecondDaemon: a daemon of this config serving from another
// folder (started in another environment) is found and named with its pid,
// whether or not the config's own folder has one too.
func TestDoctorSecondDaemon(t *testing.T) {
	other := testutil.ShortDir(t)
	otherDir := filepath.Join(other, "mcpmux")
	s := newDoctorSetup(t, "[listen]\nsocket_dir = \"s\"\n"+fakeServerTable("memory", "serve"), otherDir)
	cfg, err := config.Load(s.path)
	require.NoError(t, err)
	stopFirst := serveInProcess(t, cfg)
	second := *cfg
	second.Listen.SocketDir = otherDir // the same file, served from elsewhere
	serveInProcess(t, &second)

	out, err := s.doctor(t)
	t.Logf("doctor:\n%s", out)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	assert.Contains(t, lineWith(t, out, markWarn, "a second daemon serves this config, from "+otherDir+" (pid "), "stop it (`kill ", "doctor:\n%s", out)

	stopFirst()
	out, err = s.doctor(t)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	lineWith(t, out, markWarn, "this config's daemon serves from "+otherDir+" (pid ")
	lineWith(t, out, markNote, "daemon: none serves ~/s")
}

// TestDoctorFailedServer: a server that crashed too often is a failure,
// with its last exit, its last stderr line and what to do.
func TestDoctorFailedServer(t *testing.T) {
	s := newDoctorSetup(t, "[listen]\nsocket_dir = \"s\"\n"+fakeServerTable("broken", "exit 3", `max_restarts = 1`, `restart_backoff = "1ms"`))
	cfg, err := config.Load(s.path)
	require.NoError(t, err)
	serveInProcess(t, cfg)
	waitForState(t, cfg.Listen.SocketDir, "broken", mux.StateFailed)

	out, err := s.doctor(t)
	t.Logf("doctor:\n%s", out)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	line := lineWith(t, out, markFail, "server broken: failed: ")
	for _, want := range []string{
		"not restarted until `mcpmux restart broken`",
		// The status, then ")" or, on a loaded machine where the exit
		// came after stdin_grace, the reason " (stdout_closed))".
		"(last exit: initialize: server exited (exit status 3",
		`its last stderr line: "fake server: told to exit 3"`,
		"`mcpmux logs broken` has the rest",
	} {
		assert.Contains(t, line, want, "the failed server's line")
	}
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
			s := newDoctorSetup(t, tc.text)
			out, err := s.doctor(t)
			bad := attention(out)
			require.Len(t, bad, len(tc.want), "doctor:\n%s", out)
			for i, want := range tc.want {
				assert.True(t, strings.HasPrefix(bad[i], want), "line %d: %q", i, bad[i])
			}
			if tc.want == nil {
				assert.NoError(t, err)
				lineWith(t, out, markNote, "daemon: none serves ~/s; the first `mcpmux connect` starts one")
			} else {
				assert.Error(t, err)
			}
		})
	}
	t.Run("no config file", func(t *testing.T) {
		s := newDoctorSetup(t, "")
		require.NoError(t, os.Remove(s.path))
		out, err := s.doctor(t)
		assert.Error(t, err)
		lineWith(t, out, markFail, "config ~/mux.toml does not exist: ")
	})
}

// TestDoctorEditors: the editors' files are read (never written) for
// entries that run `mcpmux connect`: a name the config lacks and an mcpmux
// the PATH cannot find need attention; another config, or servers started
// directly, are noted.
func TestDoctorEditors(t *testing.T) {
	s := newDoctorSetup(t, "[listen]\nsocket_dir = \"s\"\n[servers.memory]\ncommand = \"cat\"\n")
	s.env.cwd = filepath.Join(s.home, "project")
	require.NoError(t, os.MkdirAll(filepath.Join(s.env.cwd, ".vscode"), 0o700))
	vscode := filepath.Join(s.env.cwd, ".vscode", "mcp.json")
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
	s.env.getenv = func(k string) string { return map[string]string{"HOME": s.home, "PATH": "/nonexistent"}[k] }

	out, err := s.doctor(t)
	assert.Error(t, err)
	where := "VS Code ~/project/.vscode/mcp.json: "
	assert.Equal(t, []string{
		"warn  " + where + `"typo" runs ` + "`mcpmux connect memroy`" + `, and the config has no server memroy (it has: memory)`,
		"warn  " + where + `starts "mcpmux" by name, and this PATH has none: install mcpmux on PATH, or use its absolute path (` + "`mcpmux client-config NAME --for vscode`" + ` prints it)`,
	}, attention(out), "doctor:\n%s", out)
	lineWith(t, out, markOK, where+"memory through mcpmux")
	lineWith(t, out, markNote, where+`"theirs" uses another config, /elsewhere/mux.toml`)
	lineWith(t, out, markNote, where+"started directly, not through mcpmux: direct")
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
		var out bytes.Buffer
		d := &doctor{env: doctorEnv{setupEnv: setupEnv{getenv: func(string) string { return "" }}}, r: report{w: &out}}
		d.checkServer(tc.st)
		assert.Equal(t, tc.want+"\n", out.String(), "state %s", tc.st.State)
	}
}
