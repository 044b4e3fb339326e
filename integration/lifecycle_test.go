package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// timedAnswer is what a session received for one request, and when.
type timedAnswer struct {
	m     *jsonrpc.Message
	err   error
	after time.Duration
}

// awaitAsync waits for the answer to id on its own goroutine, so that two
// sessions' answers are timed independently.
func awaitAsync(c *client, id string, start time.Time) <-chan timedAnswer {
	ch := make(chan timedAnswer, 1)
	go func() {
		m, _, err := c.await(id)
		ch <- timedAnswer{m, err, time.Since(start)}
	}()
	return ch
}

// listChanged reads c until it has seen every notifications/*/list_changed
// in kinds, starting with those already read (before), and fails the test
// if they do not all come within 5 s.
func listChanged(tb testing.TB, c *client, before []*jsonrpc.Message, kinds ...string) {
	tb.Helper()
	missing := map[string]bool{}
	for _, k := range kinds {
		missing["notifications/"+k+"/list_changed"] = true
	}
	for _, m := range before {
		delete(missing, m.Method)
	}
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(missing) > 0 {
		frame, err := c.r.Read()
		require.NoError(tb, err, "still waiting for %v", missing)
		m, err := jsonrpc.Parse(frame)
		require.NoError(tb, err)
		delete(missing, m.Method)
	}
}

// TestCrashMidRequest: the server exits while two sessions have requests in
// flight (one of them the crash itself). Both get -32603 upstream_exited at
// once; the sessions stay connected, are told to refresh their lists, and
// are served by the restarted process, which mcpmux initialized once.
func TestCrashMidRequest(t *testing.T) {
	d := startDaemon(t, demo("demo", nil), "")
	s1, s2 := open(t, d.socket("demo")), open(t, d.socket("demo"))
	before := s1.mustStats(t)

	require.NoError(t, s1.send(slowCall("1", 10000, 0, `"s1"`)))
	inFlight(t, s2, 1)
	start := time.Now()
	slowDone := awaitAsync(s1, "1", start)
	require.NoError(t, s2.send(toolCall("2", "crash", nil)))
	crashDone := awaitAsync(s2, "2", start)

	for name, ch := range map[string]<-chan timedAnswer{"slow call of session 1": slowDone, "crash call of session 2": crashDone} {
		f := <-ch
		require.NoError(t, f.err, name)
		e, err := errorOf(f.m)
		require.NoError(t, err, name)
		assert.Equal(t, answer{jsonrpc.CodeInternalError, jsonrpc.ReasonUpstreamExited, string(f.m.ID)},
			answer{e.Code, e.Data.Reason, string(f.m.ID)}, name)
		assert.Equal(t, "demo", e.Data.Server)
		assert.Less(t, f.after, 2*time.Second, "%s: the error must come at once", name)
		t.Logf("%s: %s %v after the crash request", name, e.Data.Reason, f.after.Round(time.Millisecond))
	}

	// Both sessions are still connected, and the restarted server serves them.
	for name, c := range map[string]*client{"session 1": s1, "session 2": s2} {
		require.NoError(t, c.send(toolCall(`"again"`, "echo", map[string]string{"text": "again"})))
		m, notes, err := c.await(`"again"`)
		require.NoError(t, err, name)
		text, err := resultText(m)
		require.NoError(t, err, name)
		assert.Equal(t, "again", text)
		listChanged(t, c, notes, "tools", "prompts", "resources")
	}
	after := s1.mustStats(t)
	assert.NotEqual(t, before.PID, after.PID, "a new process")
	assert.Equal(t, 1, after.Initialize, "the new process was initialized once")
	assert.Contains(t, d.log(), "restarting server")
}

// TestJunkTolerated: non-JSON lines on the server's stdout are logged and
// dropped; up to max_junk_lines in a row the server keeps running, one more
// and it is restarted, with an error naming the key. A startup banner, even
// one longer than max_junk_lines, is no junk.
func TestJunkTolerated(t *testing.T) {
	t.Parallel()
	d := startDaemon(t,
		demo("banner", []string{"--banner", "15"})+demo("flood", nil, "max_junk_lines = 5"), "")

	t.Run("a banner and junk mid-session", func(t *testing.T) {
		c := open(t, d.socket("banner"))
		first := c.mustStats(t)
		m, err := c.tool("1", "junk", map[string]int{"lines": 3})
		require.NoError(t, err)
		text, err := resultText(m)
		require.NoError(t, err)
		assert.Equal(t, "wrote 3 junk lines", text)
		require.NoError(t, c.echo("2", "still fine"))

		st := c.mustStats(t)
		assert.Equal(t, first.PID, st.PID, "no restart")
		assert.Equal(t, 1, st.Initialize)
		// 15 banner lines before the handshake, 3 junk lines from the tool.
		testutil.Eventually(t, 2*time.Second, "three junk lines logged", func() (bool, error) {
			return junkLogged(d.log(), "banner") >= 3, nil
		})
		assert.Equal(t, 3, junkLogged(d.log(), "banner"))
		assert.Equal(t, 15, strings.Count(d.log(), `msg="startup banner on server stdout, dropped" server=banner`))
		assert.NotContains(t, d.log(), "server=banner pid="+fmt.Sprint(first.PID)+" exit=")
	})

	t.Run("one line more than max_junk_lines", func(t *testing.T) {
		c := open(t, d.socket("flood"))
		first := c.mustStats(t)
		m, err := c.tool("1", "junk", map[string]int{"lines": 6})
		require.NoError(t, err)
		e, err := errorOf(m)
		require.NoError(t, err, "the request in flight when the server is killed fails")
		assert.Equal(t, answer{jsonrpc.CodeInternalError, jsonrpc.ReasonUpstreamExited, "1"}, answer{e.Code, e.Data.Reason, string(m.ID)})
		assert.Contains(t, e.Message, "max_junk_lines = 5", "the error names the key")
		require.NoError(t, c.echo("2", "restarted"))
		st := c.mustStats(t)
		assert.NotEqual(t, first.PID, st.PID, "restarted")
		assert.Equal(t, 1, st.Initialize)
	})
}

// junkLogged counts the daemon's log lines about junk from server name.
func junkLogged(log, name string) int {
	return len(slices.DeleteFunc(strings.Split(log, "\n"), func(line string) bool {
		return !strings.Contains(line, "junk on server stdout") || !strings.Contains(line, "server="+name+" ")
	}))
}
