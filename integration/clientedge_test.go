package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The client edge: what `mcpmux connect` and the commands that talk to a
// daemon do when the config, the daemon or the environment is not what it
// was when the daemon started.

// withState gives cfg a state folder of its own, for the daemon and for
// every command the test runs with the env it returns.
func withState(tb testing.TB, cfg *daemonConfig) []string {
	tb.Helper()
	cfg.env = append(cfg.env, "XDG_STATE_HOME="+filepath.Join(cfg.dir, "state"))
	return cfg.env
}

// TestConnectBrokenConfig: a typo added to the config of a running daemon
// does not cut its clients off: connect and status still reach the daemon
// (through the record it wrote when it started) and warn, naming the file,
// the line and the key; reload refuses the file and the daemon goes on.
func TestConnectBrokenConfig(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, demo("demo", nil), "")
	env := withState(t, cfg)
	d := serveConfig(t, cfg)

	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	lines := strings.Split(string(text), "\n")
	i := slices.Index(lines, "[servers.demo]")
	require.GreaterOrEqual(t, i, 0, "the config has [servers.demo]:\n%s", text)
	lines = append(lines[:i+1], append([]string{`comand = "typo"`}, lines[i+1:]...)...)
	require.NoError(t, os.WriteFile(cfg.path, []byte(strings.Join(lines, "\n")), 0o600))
	warning := cfg.path + ":" + strconv.Itoa(i+2) + ": servers.demo.comand: unknown key"

	echo := string(toolCall("2", "echo", map[string]string{"text": "still here"}))
	r := runMcpmux(t, env, initializeLine+"\n"+echo+"\n", "connect", "--config", cfg.path, "demo")
	require.Equal(t, 0, r.code, "connect exit code; stderr: %s", r.stderr)
	msgs := parseLines(t, r.stdout)
	require.Len(t, msgs, 2, "stdout: %s", r.stdout)
	assert.Equal(t, []string{"1", "2"}, []string{string(msgs[0].ID), string(msgs[1].ID)})
	text2, err := resultText(msgs[1])
	require.NoError(t, err)
	assert.Equal(t, "still here", text2)
	assert.Contains(t, r.stderr, "mcpmux: warning: "+warning+"\n", "connect warns naming the key")

	r = runMcpmux(t, env, "", "status", "--config", cfg.path)
	require.Equal(t, 0, r.code, "status exit code; stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "demo", "status lists the server:\n%s", r.stdout)
	assert.Contains(t, r.stderr, "mcpmux: warning: "+warning+"\n", "status warns naming the key")

	r = runMcpmux(t, env, "", "reload", "--config", cfg.path)
	assert.NotEqual(t, 0, r.code, "reload refuses a broken config")
	assert.Contains(t, r.stderr, warning)
	c := open(t, d.socket("demo"))
	require.NoError(t, c.echo("1", "after the refused reload"), "the daemon goes on")
}
