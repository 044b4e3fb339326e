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
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/doctor"
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
		_, err := daemon.NewClient(cfg.Listen.SocketDir).Status(t.Context())
		return err == nil, err
	})
	return stop
}

// waitForState waits until the daemon on dir reports server name in state.
func waitForState(t *testing.T, dir, name string, want mux.State) {
	testutil.Eventually(t, 20*time.Second, "server "+name+" is "+string(want), func() (bool, error) {
		st, err := daemon.NewClient(dir).Status(t.Context())
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
func lineWith(t *testing.T, out string, m doctor.Mark, text string) string {
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
	lineWith(t, out, doctor.OK, "config ~/mux.toml: 1 server: memory")
	lineWith(t, out, doctor.OK, "socket folder ~/s: yours, mode 0700")
	lineWith(t, out, doctor.OK, "daemon: pid ")
	assert.Contains(t, lineWith(t, out, doctor.OK, "daemon: pid "), "on ~/s, mcpmux "+mcpmuxVersion()+", up ", "the daemon's line")
	assert.True(t, strings.HasSuffix(lineWith(t, out, doctor.OK, "daemon: pid "), ", config ~/mux.toml"), "the daemon's config file")
	lineWith(t, out, doctor.OK, "server memory: ready, pid ")
	lineWith(t, out, doctor.OK, "Cursor ~/.cursor/mcp.json: memory through mcpmux")
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
	assert.Contains(t, lineWith(t, out, doctor.Warn, "a second daemon serves this config, from "+otherDir+" (pid "), "stop it (`kill ", "doctor:\n%s", out)

	stopFirst()
	out, err = s.doctor(t)
	assert.EqualError(t, err, "doctor: 1 finding needs attention", "doctor:\n%s", out)
	lineWith(t, out, doctor.Warn, "this config's daemon serves from "+otherDir+" (pid ")
	lineWith(t, out, doctor.Note, "daemon: none serves ~/s")
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
	line := lineWith(t, out, doctor.Fail, "server broken: failed: ")
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
