package integration

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestRestartedDaemonAnswersInitializeAtOnce: a server that takes 4 s to
// start. The daemon that first starts it keeps its initialize result in the
// state folder; the next daemon answers a new session's initialize from it
// while the server is still starting, and the session's first call waits
// for the server.
func TestRestartedDaemonAnswersInitializeAtOnce(t *testing.T) {
	t.Parallel()
	state := filepath.Join(testutil.ShortDir(t), "state")
	cfg := writeConfig(t, demo("slow", []string{"--start-delay", "4s"}), "")
	cfg.env = []string{"XDG_STATE_HOME=" + state}

	first := serveConfig(t, cfg)
	began := time.Now()
	c := open(t, first.socket("slow"))
	cold := time.Since(began)
	c.close()
	first.stop()
	kept, err := filepath.Glob(filepath.Join(state, "mcpmux", "servers", "*", "description.json"))
	require.NoError(t, err)
	require.Len(t, kept, 1, "the server's description is kept in the state folder")

	second := serveConfig(t, cfg)
	began = time.Now()
	c = dial(t, second.socket("slow"))
	defer c.close()
	_, err = c.initialize("2025-06-18")
	require.NoError(t, err)
	warm := time.Since(began)
	st, _ := status(t, cfg.path).server("slow")
	assert.Equal(t, "starting", st, "initialize was answered while the server starts")
	stats := c.mustStats(t) // waits for the server
	assert.Equal(t, 1, stats.Initialize, "the server itself was initialized once, by mcpmux")
	t.Logf("initialize of a server that takes 4 s to start: %v cold, %v from the state folder", cold.Round(time.Millisecond), warm.Round(time.Millisecond))
}
