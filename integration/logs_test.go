package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestLogsShowStderrAndRestarts: `mcpmux logs NAME` shows what the server
// wrote to stderr and the restart that followed its crash.
func TestLogsShowStderrAndRestarts(t *testing.T) {
	d := startDaemon(t, demo("demo", nil, `restart_backoff = "10ms"`), "")
	c := open(t, d.socket("demo"))
	m, err := c.tool(`"say"`, "stderr", map[string]any{"text": "a line for the logs"})
	require.NoError(t, err)
	require.Empty(t, m.Error)
	_, err = c.tool(`"die"`, "crash", nil)
	require.NoError(t, err)
	c.mustStats(t) // served again: the restart is done

	logs := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		out, err := mcpmux(ctx, "logs", "--config", d.path, "demo").Output()
		require.NoError(t, err)
		return string(out)
	}
	var out string
	testutil.Eventually(t, 5*time.Second, "the logs", func() (bool, error) {
		out = logs()
		return strings.Contains(out, "server ready") && strings.Count(out, "server ready") >= 2, nil
	})
	assert.Contains(t, out, `stderr="a line for the logs"`)
	assert.Contains(t, out, `msg="server exited"`)
	assert.Contains(t, out, `msg="restarting server"`)
	i, j := strings.Index(out, "a line for the logs"), strings.LastIndex(out, `msg="restarting server"`)
	assert.Less(t, i, j, "in order")

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	res, err := mcpmux(ctx, "logs", "--config", d.path, "nope").CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(res), `no server named "nope"`)
}
