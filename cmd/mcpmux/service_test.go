package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serviceFixture is a home folder with a config, and a setupEnv over it
// whose run records commands instead of running them.
type serviceFixture struct {
	home, cfg string
	env       setupEnv
	ran       []string // "systemctl --user daemon-reload", ...
	fail      map[string]bool
}

func newServiceFixture(t *testing.T, goos string, vars map[string]string) *serviceFixture {
	f := &serviceFixture{home: t.TempDir(), fail: map[string]bool{}}
	f.cfg = filepath.Join(f.home, "conf", "mux.toml")
	require.NoError(t, os.MkdirAll(filepath.Dir(f.cfg), 0o700))
	require.NoError(t, os.WriteFile(f.cfg, []byte("[servers.memory]\ncommand = \"npx\"\n"), 0o600))
	all := map[string]string{"HOME": f.home, "PATH": "/home/me/.nvm/bin:/usr/bin"}
	for k, v := range vars {
		all[k] = strings.ReplaceAll(v, "$HOME", f.home)
	}
	f.env = setupEnv{
		getenv:     func(k string) string { return all[k] },
		executable: func() (string, error) { return "/opt/mcpmux/bin/mcpmux", nil },
		goos:       goos,
		uid:        501,
		run: func(_ context.Context, name string, args ...string) ([]byte, error) {
			line := strings.Join(append([]string{name}, args...), " ")
			f.ran = append(f.ran, line)
			if f.fail[line] {
				return []byte("Failed: " + line + "\n"), errors.New("exit status 5")
			}
			return nil, nil
		},
	}
	return f
}

// service runs mcpmux service with args and returns its stdout.
func (f *serviceFixture) service(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := newServiceCmdWith(f.env)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return out.String(), err
}

// TestServiceErrors checks what install refuses before it writes: a config
// that would not load, and an mcpmux that will not be there tomorrow (the
// service package's own refusals are tested there).
func TestServiceErrors(t *testing.T) {
	t.Run("a config that does not load", func(t *testing.T) {
		f := newServiceFixture(t, "linux", nil)
		require.NoError(t, os.WriteFile(f.cfg, []byte("[servers.x]\n"), 0o600))
		_, err := f.service("install", "--config", f.cfg)
		require.Error(t, err)
		assert.Equal(t, "the service would not start: "+f.cfg+":1: servers.x.command: missing: every server needs a command", err.Error())
		assert.NoDirExists(t, filepath.Join(f.home, ".config", "systemd"))
	})
	t.Run("the default config, missing", func(t *testing.T) {
		f := newServiceFixture(t, "linux", nil)
		_, err := f.service("install")
		require.Error(t, err)
		assert.Equal(t, "the service would not start: config "+filepath.Join(f.home, ".config", "mcpmux", "mux.toml")+" does not exist: write one (the README's quick start has one), or pass --config FILE", err.Error())
	})
	t.Run("a go run build", func(t *testing.T) {
		f := newServiceFixture(t, "linux", nil)
		f.env.executable = func() (string, error) { return "/tmp/go-build99/b001/exe/mcpmux", nil }
		_, err := f.service("install", "--config", f.cfg)
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), "/tmp/go-build99/b001/exe/mcpmux is a temporary build (go run)"), err.Error())
	})
}
