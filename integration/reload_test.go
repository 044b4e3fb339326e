package integration

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// rewrite replaces the [servers.*] part of a daemon's config file.
func rewrite(tb testing.TB, d *daemon, servers string) {
	tb.Helper()
	text, err := os.ReadFile(d.path)
	require.NoError(tb, err)
	head := string(text)[:strings.Index(string(text), "[servers.")]
	require.NoError(tb, os.WriteFile(d.path, []byte(head+servers), 0o600))
}

func reload(tb testing.TB, d *daemon) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "reload", "--config", d.path).CombinedOutput()
	return string(out), err
}

// TestReload: servers added start, removed stop, changed restart with their
// sessions kept; an untouched server's request in flight is answered; a
// broken config is refused and the running one stays.
func TestReload(t *testing.T) {
	d := startDaemon(t, demo("keep", nil)+demo("change", nil)+demo("gone", nil), "")
	keep, change, gone := open(t, d.socket("keep")), open(t, d.socket("change")), open(t, d.socket("gone"))
	before := change.mustStats(t)
	require.NoError(t, keep.send(toolCall(`"inflight"`, "slow", map[string]any{"ms": 1500})))

	rewrite(t, d, demo("keep", nil)+demo("change", []string{"--stderr-noise"})+demo("new", nil))
	out, err := reload(t, d)
	require.NoError(t, err, "reload: %s", out)
	assert.Equal(t, "added: new\nremoved: gone\nrestarted: change\n", out)

	m, _, err := keep.await(`"inflight"`)
	require.NoError(t, err)
	assert.Equal(t, jsonrpc.KindResult, m.Kind, "the untouched server's request was answered: %s", m.Frame)

	after := change.mustStats(t)
	assert.NotEqual(t, before.PID, after.PID, "the changed server runs anew, and its session stayed")

	_, err = gone.read()
	assert.Error(t, err, "the removed server's session is closed")
	_, err = os.Stat(d.socket("gone"))
	assert.True(t, os.IsNotExist(err), "its socket is gone")
	assert.NoError(t, open(t, d.socket("new")).echo(`"hi"`, "hello"), "the added server serves")

	// A broken file is refused; everything keeps running.
	require.NoError(t, os.WriteFile(d.path, []byte("[servers.x]\ncommand = 5\n"), 0o600))
	out, err = reload(t, d)
	assert.Error(t, err)
	assert.Contains(t, out, "servers.x.command")
	assert.NoError(t, keep.echo(`"still"`, "here"))

	// SIGHUP does the same as reload.
	rewrite(t, d, demo("keep", nil)+demo("change", []string{"--stderr-noise"})+demo("new", nil)+demo("hup", nil))
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
	testutil.Eventually(t, 10*time.Second, "the server added by SIGHUP", func() (bool, error) {
		c, err := dialSocket(d.socket("hup"))
		if err != nil {
			return false, err
		}
		c.close()
		return true, nil
	})
}
