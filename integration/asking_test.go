package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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
	askingTurns(t, demoAsking)
}

// TestRealWorldAskingTakesTurnsAlone is TestAskingToolTakesTurnsAlone with
// server-everything: its trigger-sampling-request samples, its echo and
// trigger-long-running-operation do not.
func TestRealWorldAskingTakesTurnsAlone(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	askingTurns(t, askingKit{
		server: func(name string, extra ...string) string {
			return rw.server(name, rwEverything, []string{"stdio"}, append([]string{rwFast}, extra...)...)
		},
		kind: "tools/call trigger-sampling-request",
		ask: func(id, text string) []byte {
			return toolCall(id, "trigger-sampling-request", map[string]string{"prompt": text})
		},
		prompt:   func(text string) string { return "Resource trigger-sampling-request context: " + text },
		answered: func(result, text string) bool { return strings.Contains(result, `"text": "`+text+`"`) },
		echo: func(c *client, id, text string) error {
			return expectText(c, id, "echo", map[string]string{"message": text}, "Echo: "+text)
		},
		slow: func(c *client, id string) error {
			return expectText(c, id, "trigger-long-running-operation", map[string]int{"duration": 1, "steps": 1},
				"Long running operation completed. Duration: 1 seconds, Steps: 1.")
		},
	})
}

// askingKit is what askingTurns needs of a server: a tool that samples
// (ask), one that does not (echo) and one that takes a second (slow).
type askingKit struct {
	server   func(name string, extra ...string) string // a [servers.NAME] table
	kind     string                                    // the kind status -v names once ask was seen asking
	ask      func(id, text string) []byte              // a call of the asking tool, whose sampling request carries text
	prompt   func(text string) string                  // the text of that sampling request
	answered func(result, text string) bool            // whether an ask's result carries the sampling answer text
	echo     func(c *client, id, text string) error
	slow     func(c *client, id string) error
}

// demoAsking is the demo server's kit: ask, echo and slow.
var demoAsking = askingKit{
	server: func(name string, extra ...string) string { return demo(name, nil, extra...) },
	kind:   "tools/call ask",
	ask: func(id, text string) []byte {
		return toolCall(id, "ask", map[string]string{"text": text})
	},
	prompt:   func(text string) string { return text },
	answered: func(result, text string) bool { return result == text },
	echo:     func(c *client, id, text string) error { return c.echo(id, text) },
	slow: func(c *client, id string) error {
		m, err := c.tool(id, "slow", map[string]int{"ms": 1000})
		if err == nil {
			_, err = resultText(m)
		}
		return err
	},
}

// expectText calls a tool and checks that its answer's text is want.
func expectText(c *client, id, tool string, args any, want string) error {
	m, err := c.tool(id, tool, args)
	if err != nil {
		return err
	}
	got, err := resultText(m)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s answered %q, want %q", tool, got, want)
	}
	return nil
}

// askingTurns runs three servers of k's, under auto, latest and serialize,
// and shows that under auto only the asking tool takes turns, once seen.
func askingTurns(t *testing.T, k askingKit) {
	// A state folder of its own: what the daemon learns of the demo server
	// stays with this test. The three servers start the same way, so they
	// share a memory, which only auto reads.
	cfg := writeConfig(t, k.server("auto")+k.server("latest", `server_requests = "latest"`)+k.server("serial", `server_requests = "serialize"`), "")
	cfg.env = append(cfg.env, "XDG_STATE_HOME="+filepath.Join(cfg.dir, "state"))
	d := serveConfig(t, cfg)
	for _, name := range []string{"latest", "auto"} {
		a := openSampling(t, d.socket(name))
		require.NoError(t, k.askAnswering(a, `"seen"`, "A"), "%s: the first ask", name)
	}

	// status -v names the kind learned, for the server that learns, and
	// the server serialized as a whole.
	out := statusVerbose(t, d)
	assert.Contains(t, string(out), "\nauto: these requests cause the server's own, and take turns: "+k.kind+"\n")
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
		require.NoError(t, a.send(k.ask(`"waits"`, "A")))
		ask, err := nextRequest(a)
		require.NoError(t, err, "%s: the waiting ask's sampling request", name)
		for round := range 5 {
			took := make([]time.Duration, len(others))
			errs := make([]error, len(others))
			var wg sync.WaitGroup
			for i, c := range others {
				wg.Go(func() {
					start := time.Now()
					errs[i] = k.echo(c, fmt.Sprintf(`"echo-%d"`, round), "meanwhile")
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
		assert.True(t, k.answered(got, "A"), "%s: the waiting ask answered %q", name, got)
	}
	slowest := func(ds []time.Duration) time.Duration { return slices.Max(ds) }
	t.Logf("echo while an ask waits, 4 sessions x 5 rounds: latest median %v max %v; auto median %v max %v",
		median(echoes["latest"]), slowest(echoes["latest"]), median(echoes["auto"]), slowest(echoes["auto"]))
	// Generous for a loaded machine: what is ruled out is an echo waiting
	// for the ask (it would wait for ever, as the ask is not answered
	// before the echoes are), not milliseconds of noise.
	assert.LessOrEqual(t, median(echoes["auto"]), 2*median(echoes["latest"])+20*time.Millisecond, "the median echo under auto, against latest")
	for i, took := range echoes["auto"] {
		assert.Less(t, took, time.Second, "echo %d under auto", i)
	}

	// Two asks at once, from two sessions, five times: each sampling
	// request reaches the session whose ask caused it.
	a, b := openSampling(t, d.socket("auto")), openSampling(t, d.socket("auto"))
	for round := range 5 {
		var wg sync.WaitGroup
		var errA, errB error
		wg.Go(func() { errA = k.askAnswering(a, fmt.Sprintf(`"a-%d"`, round), "A") })
		wg.Go(func() { errB = k.askAnswering(b, fmt.Sprintf(`"b-%d"`, round), "B") })
		wg.Wait()
		require.NoError(t, errA, "round %d", round)
		require.NoError(t, errB, "round %d", round)
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
			wg.Go(func() { errs[i] = k.slow(c, `"slow"`) })
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
	out = statusVerbose(t, d)
	assert.Contains(t, out, "\nauto: these requests cause the server's own, and take turns: "+k.kind+"\n", "after a restart")
	assert.NotContains(t, out, "\nlatest: ", "after a restart")
	assert.NotContains(t, out, "\nserial: these requests", "after a restart")
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

// askAnswering calls k's asking tool with name as its text and answers
// every sampling request the session gets with name, after checking that
// it carries name (it was caused by this session's ask); it fails unless
// the ask's result carries the answer.
func (k askingKit) askAnswering(c *client, id, name string) error {
	if err := c.send(k.ask(id, name)); err != nil {
		return err
	}
	for {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("%s waiting for %s: %w", name, id, err)
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
			if err := json.Unmarshal(m.Params, &p); err != nil || len(p.Messages) != 1 || p.Messages[0].Content.Text != k.prompt(name) {
				return fmt.Errorf("%s got a sampling request of another session's: %s", name, m.Frame)
			}
			if err := answerSampling(c, m.ID, name); err != nil {
				return err
			}
		case (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && string(m.ID) == id:
			got, err := resultText(m)
			if err != nil {
				return err
			}
			if !k.answered(got, name) {
				return fmt.Errorf("%s's ask answered %q", name, got)
			}
			return nil
		}
	}
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
