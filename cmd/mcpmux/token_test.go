package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// token rotate replaces the generated token with a new one of the same
// form, mode 0600, each time, never printing it; client-config --http then
// gives the new one. A token the config sets is refused, naming the file.
func TestTokenRotate(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state) // no records of the user's daemons
	cfgPath := filepath.Join(t.TempDir(), "mux.toml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(clientConfigToml), 0o600))
	tokenPath := filepath.Join(state, "mcpmux", "http.token")
	require.NoError(t, os.MkdirAll(filepath.Dir(tokenPath), 0o700))
	require.NoError(t, os.WriteFile(tokenPath, []byte("old-token\n"), 0o600))
	env := fakeSetupEnv(t, map[string]string{"XDG_STATE_HOME": state, "HOME": t.TempDir()}, "/usr/bin/mcpmux")

	rotate := func() (string, string) {
		t.Helper()
		var out bytes.Buffer
		cmd := newTokenCmdWith(env)
		cmd.SetArgs([]string{"rotate", "--config", cfgPath})
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		require.NoError(t, cmd.Execute())
		b, err := os.ReadFile(tokenPath)
		require.NoError(t, err)
		fi, err := os.Stat(tokenPath)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		return strings.TrimSpace(string(b)), out.String()
	}
	first, out := rotate()
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), first)
	assert.Contains(t, out, "new token written to "+tokenPath)
	assert.NotContains(t, out, first, "the token is never printed")
	second, _ := rotate()
	assert.NotEqual(t, first, second, "a new token each time")

	var cc bytes.Buffer
	cmd := newClientConfigCmdWith(env)
	cmd.SetArgs([]string{"memory", "--for", "cursor", "--http", "--config", cfgPath})
	cmd.SetOut(&cc)
	cmd.SetErr(&bytes.Buffer{})
	require.NoError(t, cmd.Execute())
	assert.Contains(t, cc.String(), "Bearer "+second, "client-config gives the new token")

	fixed := filepath.Join(t.TempDir(), "fixed.toml")
	require.NoError(t, os.WriteFile(fixed, []byte("[listen]\nhttp = \"127.0.0.1:7878\"\nhttp_token = \"set\"\n\n[servers.memory]\ncommand = \"npx\"\n"), 0o600))
	cmd = newTokenCmdWith(env)
	cmd.SetArgs([]string{"rotate", "--config", fixed})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	require.Error(t, err)
	assert.Equal(t, "the token is http_token in [listen] of "+fixed+": change it there, then restart the daemon", err.Error())
	b, _ := os.ReadFile(tokenPath)
	assert.Equal(t, second, strings.TrimSpace(string(b)), "the file is left alone")
}
