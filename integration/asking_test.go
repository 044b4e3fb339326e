package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestAskingToolTakesTurnsAlone: under the default server_requests =
// "auto", once the demo server's ask tool was seen sampling, only ask calls
// take turns. Other sessions' calls run while an ask waits for its
// sampling answer, about as fast as under "latest"; two asks at once each
// get their own sampling request; and 50 one-second calls at once take
// about their time under "latest".
func TestAskingToolTakesTurnsAlone(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("auto", nil)+demo("latest", nil, `server_requests = "latest"`)+demo("serial", nil, `server_requests = "serialize"`), "")
	for _, name := range []string{"latest", "auto"} {
		a := openSampling(t, d.socket(name))
		text, err := askAnswering(a, `"seen"`, "A")
		require.NoError(t, err, "%s: the first ask", name)
		require.Equal(t, "A", text, "%s: the first ask", name)
	}

	// status -v names the kind learned, for the server that learns, and
	// the server serialized as a whole.
	out := statusVerbose(t, d)
	assert.Contains(t, string(out), "\nauto: these requests cause the server's own, and take turns: tools/call ask\n")
	assert.NotContains(t, string(out), "\nlatest: ")
	assert.NotContains(t, string(out), "\nauto: serialized")
	assert.Contains(t, string(out), "\nserial: serialized as a whole: every interactive request takes turns\n")

	// Echoes from four other sessions while an ask waits for its answer.
	echoes := map[string][]time.Duration{}
	for _, name := range []string{"latest", "auto"} {
		a := openSampling(t, d.socket(name))
		others := make([]*client, 4)
		for i := range others {
			others[i] = openSampling(t, d.socket(name))
		}
		require.NoError(t, a.send(toolCall(`"waits"`, "ask", map[string]string{"text": "A"})))
		ask, err := nextRequest(a)
		require.NoError(t, err, "%s: the waiting ask's sampling request", name)
		for round := range 5 {
			took := make([]time.Duration, len(others))
			errs := make([]error, len(others))
			var wg sync.WaitGroup
			for i, c := range others {
				wg.Go(func() {
					start := time.Now()
					errs[i] = c.echo(fmt.Sprintf(`"echo-%d"`, round), "meanwhile")
					took[i] = time.Since(start)
				})
			}
			wg.Wait()
			for i := range others {
				require.NoError(t, errs[i], "%s: session %d's echo while an ask waits", name, i)
			}
			echoes[name] = append(echoes[name], took...)
		}
		require.NoError(t, answerSampling(a, ask.ID, "A"))
		m, _, err := a.await(`"waits"`)
		require.NoError(t, err)
		got, err := resultText(m)
		require.NoError(t, err)
		assert.Equal(t, "A", got, "%s: the waiting ask", name)
	}
	slowest := func(ds []time.Duration) time.Duration { return slices.Max(ds) }
	t.Logf("echo while an ask waits, 4 sessions x 5 rounds: latest median %v max %v; auto median %v max %v",
		median(echoes["latest"]), slowest(echoes["latest"]), median(echoes["auto"]), slowest(echoes["auto"]))
	// Generous for a loaded machine: what is ruled out is an echo waiting
	// for the ask (seconds), not a few milliseconds of noise.
	bound := 2*slowest(echoes["latest"]) + 100*time.Millisecond
	for i, took := range echoes["auto"] {
		assert.LessOrEqual(t, took, bound, "echo %d under auto, against %v at most under latest", i, slowest(echoes["latest"]))
	}

	// Two asks at once, from two sessions, five times: each sampling
	// request reaches the session whose ask caused it.
	a, b := openSampling(t, d.socket("auto")), openSampling(t, d.socket("auto"))
	for round := range 5 {
		var wg sync.WaitGroup
		var errA, errB error
		var gotA, gotB string
		wg.Go(func() { gotA, errA = askAnswering(a, fmt.Sprintf(`"a-%d"`, round), "A") })
		wg.Go(func() { gotB, errB = askAnswering(b, fmt.Sprintf(`"b-%d"`, round), "B") })
		wg.Wait()
		require.NoError(t, errA, "round %d", round)
		require.NoError(t, errB, "round %d", round)
		assert.Equal(t, []string{"A", "B"}, []string{gotA, gotB}, "round %d", round)
	}

	// 50 one-second calls at once, from 50 sessions.
	took := map[string]time.Duration{}
	for _, name := range []string{"latest", "auto"} {
		clients := make([]*client, 50)
		for i := range clients {
			clients[i] = openSampling(t, d.socket(name))
		}
		errs := make([]error, len(clients))
		var wg sync.WaitGroup
		start := time.Now()
		for i, c := range clients {
			wg.Go(func() {
				m, err := c.tool(`"slow"`, "slow", map[string]int{"ms": 1000})
				if err == nil {
					_, err = resultText(m)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		took[name] = time.Since(start)
		for i := range clients {
			require.NoError(t, errs[i], "%s: one-second call %d", name, i)
		}
	}
	t.Logf("50 one-second calls at once: latest %v, auto %v", took["latest"], took["auto"])
	assert.Less(t, took["auto"], took["latest"]*3/2+250*time.Millisecond, "auto against latest")

	// The next daemon knows the kind from the start, from the state folder.
	d.stop()
	d = serveConfig(t, d.daemonConfig)
	assert.Contains(t, statusVerbose(t, d), "\nauto: these requests cause the server's own, and take turns: tools/call ask\n", "after a restart")
}

// statusVerbose is what `mcpmux status -v` prints.
func statusVerbose(t *testing.T, d *daemon) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "-v", "--config", d.path).Output()
	require.NoError(t, err, "mcpmux status -v")
	return string(out)
}

// openSampling dials a socket and initializes a session that can take
// sampling requests.
func openSampling(tb testing.TB, path string) *client {
	tb.Helper()
	c := dial(tb, path)
	m, err := c.call(`"init"`, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{"sampling": map[string]any{}},
		"clientInfo":      map[string]any{"name": "integration", "version": "1"},
	})
	require.NoError(tb, err)
	require.Equal(tb, jsonrpc.KindResult, m.Kind, "initialize: %s", m.Frame)
	require.NoError(tb, c.send(notification("notifications/initialized", nil)))
	return c
}

// nextRequest reads until a request from the server.
func nextRequest(c *client) (*jsonrpc.Message, error) {
	for {
		m, err := c.read()
		if err != nil {
			return nil, err
		}
		if m.Kind == jsonrpc.KindRequest {
			return m, nil
		}
		if m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError {
			return nil, fmt.Errorf("an answer came before the server's request: %s", m.Frame)
		}
	}
}

// answerSampling answers a sampling request with text.
func answerSampling(c *client, id json.RawMessage, text string) error {
	return c.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":%q},"model":"test"}}`, id, text))
}

// askAnswering calls the demo server's ask tool with name as its text and
// answers every sampling request the session gets with name, after
// checking that it carries name (it was caused by this session's ask); it
// returns the ask's text.
func askAnswering(c *client, id, name string) (string, error) {
	if err := c.send(toolCall(id, "ask", map[string]string{"text": name})); err != nil {
		return "", err
	}
	for {
		m, err := c.read()
		if err != nil {
			return "", fmt.Errorf("%s waiting for %s: %w", name, id, err)
		}
		switch {
		case m.Kind == jsonrpc.KindRequest && m.Method == "sampling/createMessage":
			var p struct {
				Messages []struct {
					Content struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil || len(p.Messages) != 1 || p.Messages[0].Content.Text != name {
				return "", fmt.Errorf("%s got a sampling request of another session's: %s", name, m.Frame)
			}
			if err := answerSampling(c, m.ID, name); err != nil {
				return "", err
			}
		case (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && string(m.ID) == id:
			return resultText(m)
		}
	}
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
