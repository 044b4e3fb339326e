package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestMissingCommandRefusedAtOnce: a server whose command does not exist.
// A session's initialize is refused as soon as the start fails, naming the
// command and the system's error, not after start_timeout (a minute here,
// more than the read deadline).
func TestMissingCommandRefusedAtOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "[servers.ghost]\ncommand = \"/nonexistent/mcp-ghost\"\nstart_timeout = \"1m\"\n", "")
	c := dial(t, d.socket("ghost"))
	defer c.close()
	began := time.Now()
	m, err := initAnswer(c)
	took := time.Since(began)
	require.NoError(t, err, "answered, within the read deadline")
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, jsonrpc.ReasonUpstreamUnavailable, e.Data.Reason)
	assert.Contains(t, e.Message, "/nonexistent/mcp-ghost")
	assert.Contains(t, e.Message, "no such file or directory")
	t.Logf("a missing command refused in %v: %s", took.Round(time.Millisecond), e.Message)
}

// TestStrictServerStarts: a server that refuses capability members it does
// not know, as Java SDK servers do, starts behind a default config, since
// mcpmux declares the plain shapes; one told to declare more refuses it.
func TestStrictServerStarts(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("strict", []string{"--strict-capabilities"})+
		demo("told", []string{"--strict-capabilities"}, "start_timeout = \"2s\"", "max_restarts = 1",
			"upstream_capabilities = { sampling = { tools = {} } }"), "")
	c := open(t, d.socket("strict"))
	defer c.close()
	assert.Equal(t, 1, c.mustStats(t).Initialize, "the strict server took mcpmux's initialize")

	c2 := dial(t, d.socket("told"))
	defer c2.close()
	m, err := initAnswer(c2)
	require.NoError(t, err)
	_, err = errorOf(m)
	require.NoError(t, err, "the server refused sampling.tools, so there is no server to answer: %s", m.Frame)
	assert.Contains(t, d.log(), "Unrecognized field in ClientCapabilities")
}

// TestSlowInitializeStartsOnce: a server that takes longer than
// start_timeout to start. The session that waited is told it is not ready;
// the server is not killed for it, starts once, and serves.
func TestSlowInitializeStartsOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("slow", []string{"--start-delay", "2s"}, `start_timeout = "300ms"`, `first_start_timeout = "300ms"`), "")
	c := dial(t, d.socket("slow"))
	defer c.close()
	m, err := initAnswer(c)
	require.NoError(t, err)
	e, err := errorOf(m)
	require.NoError(t, err, "start_timeout bounds the wait")
	assert.Contains(t, e.Message, "server slow is not ready within start_timeout (300ms); it has been starting for ")

	c = dial(t, d.socket("slow"))
	defer c.close()
	var st demoStats
	deadline := time.Now().Add(readyTimeout)
	for {
		m, err := initAnswer(c)
		require.NoError(t, err)
		if m.Kind == jsonrpc.KindResult {
			st = c.mustStats(t)
			break
		}
		require.True(t, time.Now().Before(deadline), "the slow server never became ready: %s", m.Frame)
	}
	assert.Equal(t, 1, st.Initialize, "one start, initialized once")
	assert.Equal(t, 0, status(t, d.path).Servers[0].Restarts, "not killed for its slowness")
}

// TestFirstStartOutlastsSlowDownload: a server never started before
// that takes 45 s to answer (here 4.5 s, with start_timeout 3 s and
// first_start_timeout 30 s: the defaults divided by ten) serves the
// initialize sent at once, and the log shows its progress meanwhile.
func TestFirstStartOutlastsSlowDownload(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("slow", []string{"--start-delay", "4500ms"}, `start_timeout = "3s"`, `first_start_timeout = "30s"`), "")
	c := dial(t, d.socket("slow"))
	defer c.close()
	start := time.Now()
	m, err := initAnswer(c)
	require.NoError(t, err)
	took := time.Since(start)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "the initialize sent at once: %s", m.Frame)
	t.Logf("initialize answered after %v", took)
	assert.Greater(t, took, 3*time.Second, "past start_timeout")
	assert.GreaterOrEqual(t, strings.Count(d.log(), "still starting ("), 3, "a progress line a second (a third of start_timeout):\n%s", d.log())
	assert.Equal(t, 0, status(t, d.path).Servers[0].Restarts, "started once")
}

// initAnswer is initialize's answer, result or error; err is a failure to
// get one at all.
func initAnswer(c *client) (*jsonrpc.Message, error) {
	m, err := c.initialize("2025-06-18")
	if m != nil {
		return m, nil
	}
	return nil, err
}
