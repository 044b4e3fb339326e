package mux

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

const samplingCaps = `{"sampling":{},"elicitation":{}}`

// quiet proves a session received nothing since its last read: the answer
// to a ping is the next thing it reads.
func quiet(t *testing.T, c *testClient, what string) {
	t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"quiet?","method":"ping"}`)
	m := c.next()
	assert.Equal(t, `"quiet?"`, string(m.ID), "%s: got %s", what, m.Frame)
}

func TestSamplingGoesToTheCaller(t *testing.T) {
	h := newHarness(t, nil)
	a := h.sessionWith("2025-11-25", samplingCaps)
	b := h.sessionWith("2025-11-25", samplingCaps)
	c := h.sessionWith("2025-11-25", samplingCaps)
	a.send(`{"jsonrpc":"2.0","id":"call","method":"sample"}`)
	req := a.recv()
	require.Equal(t, "sampling/createMessage", req.Method)
	require.Equal(t, jsonrpc.KindRequest, req.Kind)
	a.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"from A"}}}`)
	res := a.recv()
	assert.Equal(t, `"call"`, string(res.ID))
	assert.JSONEq(t, `{"answer":{"role":"assistant","content":{"type":"text","text":"from A"}}}`, string(res.Result))
	quiet(t, b, "B")
	quiet(t, c, "C")
}

func TestSamplingNeedsTheCapability(t *testing.T) {
	h := newHarness(t, nil)
	plain := h.session("2025-11-25")
	start := time.Now()
	plain.send(`{"jsonrpc":"2.0","id":"call","method":"sample"}`)
	res := plain.recv()
	assert.Equal(t, `"call"`, string(res.ID), "no sampling request reaches a session that did not declare it")
	var body struct {
		Answer struct {
			Error struct {
				Code int `json:"code"`
				Data struct {
					Reason string `json:"reason"`
				} `json:"data"`
			} `json:"error"`
		} `json:"answer"`
	}
	require.NoError(t, json.Unmarshal(res.Result, &body))
	assert.Equal(t, []any{-32603, "no_client"}, []any{body.Answer.Error.Code, body.Answer.Error.Data.Reason})
	assert.Less(t, time.Since(start), time.Second, "answered at once")

	// Elicitation nobody can take is cancelled, not an error.
	plain.send(`{"jsonrpc":"2.0","id":"call2","method":"elicit"}`)
	assert.JSONEq(t, `{"answer":{"action":"cancel"}}`, string(plain.recv().Result))
}

func TestSessionLeavingAnswersTheServer(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ServerRequestTimeout = 200 * time.Millisecond })
	a := h.sessionWith("2025-11-25", samplingCaps)
	a.send(`{"jsonrpc":"2.0","id":"call","method":"elicit"}`)
	require.Equal(t, "elicitation/create", a.recv().Method)
	// A does not answer: after the timeout the server gets "cancel", and A
	// is told its request was cancelled.
	cancelled := a.recv()
	assert.Equal(t, "notifications/cancelled", cancelled.Method)
	assert.JSONEq(t, `{"answer":{"action":"cancel"}}`, string(a.recv().Result))
}

// callAnswering calls the fake's sample tool and answers, with name, every
// sampling request the session receives until its call's answer comes,
// which it returns.
func callAnswering(t *testing.T, c *testClient, id, name string) *jsonrpc.Message {
	c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"sample"}}`)
	for {
		frame, err := c.recvFrame()
		if !assert.NoError(t, err, "%s waiting for %s", name, id) {
			return nil
		}
		m, _ := jsonrpc.Parse(frame)
		if m.Kind == jsonrpc.KindRequest {
			c.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"from":"` + name + `"}}`)
			continue
		}
		return m
	}
}

// Under "serialize", and under the default "auto" once the server has sent
// its first request, every sampling request reaches the session whose call
// caused it, however many sessions call at once.
func TestServerRequestsAttributedExactly(t *testing.T) {
	tests := []struct {
		policy    string
		sessions  int
		inexact   int // rounds from the start whose attribution is not checked
		rounds    int
		persisted bool
		seen      bool
		kinds     []string
	}{
		{"serialize", 2, 0, 100, false, false, nil},
		{"", 4, 1, 30, true, false, nil},                                // auto: the first round may go by "latest"
		{"auto", 4, 0, 30, false, true, nil},                            // auto, the server remembered by an older mcpmux: exact from the start
		{"auto", 4, 0, 30, false, false, []string{"tools/call sample"}}, // auto, the kind remembered: exact from the start
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("policy=%s,seen=%v,kinds=%d", tt.policy, tt.seen, len(tt.kinds)), func(t *testing.T) {
			var told atomic.Int32
			h := newHarness(t, func(c *Config) {
				c.ServerRequests = tt.policy
				c.Memory = &countingMemory{told: &told, seen: tt.seen, kinds: tt.kinds}
			})
			clients := map[string]*testClient{}
			for i := range tt.sessions {
				clients[string(rune('A'+i))] = h.sessionWith("2025-11-25", samplingCaps)
			}
			for round := range tt.rounds {
				var wg sync.WaitGroup
				for name, c := range clients {
					wg.Go(func() {
						id := fmt.Sprintf(`"%s-%d"`, name, round)
						res := callAnswering(t, c, id, name)
						if res == nil || !assert.Equal(t, id, string(res.ID)) || round < tt.inexact {
							return
						}
						assert.JSONEq(t, `{"answer":{"from":"`+name+`"}}`, string(res.Result), "round %d", round)
					})
				}
				wg.Wait()
				if t.Failed() {
					return
				}
			}
			if tt.persisted {
				assert.Equal(t, int32(1), told.Load(), "the daemon is told once that the server sends requests")
			}
		})
	}
}

func TestSubscriptionsAreCounted(t *testing.T) {
	h := newHarness(t, nil)
	a, b, c := h.session("2025-11-25"), h.session("2025-11-25"), h.session("2025-11-25")
	sub := func(cl *testClient, method, uri string) {
		cl.send(`{"jsonrpc":"2.0","id":"s","method":"` + method + `","params":{"uri":"` + uri + `"}}`)
		m := cl.recv()
		require.Equal(t, jsonrpc.KindResult, m.Kind, "%s %s: %s", method, uri, m.Frame)
	}
	sub(a, "resources/subscribe", "file:///x")
	sub(b, "resources/subscribe", "file:///x")
	sub(b, "resources/subscribe", "file:///y")
	upstreamURIs := func(method string) []string {
		var out []string
		for _, m := range h.srv.messages(method) {
			var p struct {
				URI string `json:"uri"`
			}
			json.Unmarshal(m.Params, &p)
			out = append(out, p.URI)
		}
		return out
	}
	assert.Equal(t, []string{"file:///x", "file:///y"}, upstreamURIs("resources/subscribe"))

	p := h.srv.current()
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///x/child"}}`))
	assert.Equal(t, "notifications/resources/updated", a.recv().Method, "A holds a prefix of it")
	assert.Equal(t, "notifications/resources/updated", b.recv().Method)
	quiet(t, c, "C subscribed to nothing")

	sub(a, "resources/unsubscribe", "file:///x")
	assert.Empty(t, upstreamURIs("resources/unsubscribe"), "B still holds x")
	b.conn.Close()
	eventually(t, "unsubscribes for x and y", func() bool { return len(h.srv.messages("resources/unsubscribe")) == 2 })
	assert.ElementsMatch(t, []string{"file:///x", "file:///y"}, upstreamURIs("resources/unsubscribe"))
}

func TestLogLevelsPerSession(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DefaultLogLevel = "warning" })
	h.srv.set(func(f *fakeServer) { f.caps = `{"logging":{},"tools":{}}` })
	eventually(t, "first start", func() bool { return h.Status().State == StateReady })
	h.srv.current().crash("exited") // come back with logging
	eventually(t, "logging capability", func() bool {
		r := h.hub.describedServer()
		return h.srv.started() == 2 && r != nil && r.has("logging") && h.Status().State == StateReady
	})
	debug, quietOne := h.session("2025-11-25"), h.session("2025-11-25")
	debug.send(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
	assert.JSONEq(t, `{}`, string(debug.answer().Result))
	debug.send(`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"loud"}}`)
	code, reason := errorOf(t, debug.answer())
	assert.Equal(t, []any{-32602, "invalid_level"}, []any{code, reason})
	eventually(t, "the level upstream", func() bool { return len(h.srv.messages("logging/setLevel")) == 1 })
	assert.JSONEq(t, `{"level":"debug"}`, string(h.srv.messages("logging/setLevel")[0].Params))

	p := h.srv.current()
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"chatty"}}`))
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"bad"}}`))
	assert.JSONEq(t, `{"level":"info","data":"chatty"}`, string(debug.next().Params))
	assert.JSONEq(t, `{"level":"error","data":"bad"}`, string(debug.next().Params))
	assert.JSONEq(t, `{"level":"error","data":"bad"}`, string(quietOne.next().Params), "warning admits error only")
	quiet(t, quietOne, "no info line for a warning-level session")

	debug.conn.Close()
	eventually(t, "the level back to the default", func() bool { return len(h.srv.messages("logging/setLevel")) == 2 })
	assert.JSONEq(t, `{"level":"warning"}`, string(h.srv.messages("logging/setLevel")[1].Params))
}

func TestTasksBelongToTheirCreator(t *testing.T) {
	h := newHarness(t, nil)
	a, b := h.session("2025-11-25"), h.session("2025-11-25")
	a.send(`{"jsonrpc":"2.0","id":1,"method":"task","params":{"task":{"ttl":60000}}}`) // task-augmented, as the spec asks
	assert.Contains(t, string(a.recv().Result), `"taskId":"t-`)
	taskID := "t-" + string(h.srv.messages("task")[0].ID)

	b.send(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`)
	code, reason := errorOf(t, b.recv())
	assert.Equal(t, []any{-32602, "unknown_task"}, []any{code, reason})
	assert.Empty(t, h.srv.messages("tasks/get"), "B's request never reached the server")

	a.send(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"` + taskID + `"}}`)
	assert.Equal(t, jsonrpc.KindResult, a.recv().Kind)

	p := h.srv.current()
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"` + taskID + `","status":"completed"}}`))
	assert.Equal(t, "notifications/tasks/status", a.recv().Method)
	quiet(t, b, "B never hears of A's task")

	b.send(`{"jsonrpc":"2.0","id":3,"method":"tasks/list"}`)
	code, reason = errorOf(t, b.recv())
	assert.Equal(t, []any{-32601, "not_supported"}, []any{code, reason})
}

func TestConfiguredRoots(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Roots = []string{"file:///srv/a", "file:///srv/b"} })
	a := h.session("2025-11-25")
	var init struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(h.srv.messages("initialize")[0].Params, &init))
	assert.JSONEq(t, `{"listChanged":true}`, string(init.Capabilities["roots"]))
	a.send(`{"jsonrpc":"2.0","id":1,"method":"roots"}`)
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///srv/a"},{"uri":"file:///srv/b"}]}}`, string(a.recv().Result))
}

func TestRootsFromSessions(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RootsFromSessions = true })
	a := h.connect()
	a.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}}}}`)
	require.Equal(t, jsonrpc.KindResult, a.recv().Kind)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ask := a.recv()
	require.Equal(t, "roots/list", ask.Method)
	a.send(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"roots":[{"uri":"file:///home/a"}]}}`)
	eventually(t, "the server told of new roots", func() bool { return len(h.srv.messages("notifications/roots/list_changed")) == 1 })
	b := h.session("2025-11-25")
	b.send(`{"jsonrpc":"2.0","id":1,"method":"roots"}`)
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///home/a"}]}}`, string(b.recv().Result))
}

// countingMemory is a Memory that remembers nothing and counts what it is
// told.
type countingMemory struct {
	told  *atomic.Int32
	seen  bool     // a record of an older mcpmux: the server asks, no kinds
	kinds []string // the kinds remembered to ask
}

func (m *countingMemory) Asks() ([]string, bool)                   { return m.kinds, m.seen }
func (m *countingMemory) RememberAsks(string) error                { m.told.Add(1); return nil }
func (m *countingMemory) Description() (string, []byte)            { return "", nil }
func (m *countingMemory) RememberDescription(string, []byte) error { return nil }

// Under "auto", once a kind of request was seen asking, only requests of
// that kind take turns: another session's echo is answered while a sample
// call waits for its sampling answer, and a second sample call waits for
// the first, so that each gets its own sampling request.
func TestOnlyAskingKindsTakeTurns(t *testing.T) {
	var told atomic.Int32
	h := newHarness(t, func(c *Config) { c.Memory = &countingMemory{told: &told} })
	a := h.sessionWith("2025-11-25", samplingCaps)
	b := h.sessionWith("2025-11-25", samplingCaps)
	others := []*testClient{h.sessionWith("2025-11-25", samplingCaps), h.sessionWith("2025-11-25", samplingCaps)}
	require.Equal(t, `"first"`, string(callAnswering(t, a, `"first"`, "A").ID))
	assert.Equal(t, []string{"tools/call sample"}, h.hub.Status().Asks)
	assert.False(t, h.hub.Status().Serialized)
	assert.Equal(t, int32(1), told.Load(), "the kind is remembered")

	a.send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"sample"}}`)
	askA := a.recv()
	require.Equal(t, "sampling/createMessage", askA.Method)
	b.send(`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"sample"}}`)
	for i, c := range others {
		id := fmt.Sprintf(`"echo-%d"`, i)
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo"}}`)
		assert.Equal(t, id, string(c.recv().ID), "an echo is answered while a sample call waits for its answer")
	}
	quiet(t, b, "B's sample call waits for A's")
	a.send(`{"jsonrpc":"2.0","id":` + string(askA.ID) + `,"result":{"from":"A"}}`)
	resA := a.recv()
	assert.Equal(t, `"a"`, string(resA.ID))
	assert.JSONEq(t, `{"answer":{"from":"A"}}`, string(resA.Result))
	askB := b.recv()
	require.Equal(t, "sampling/createMessage", askB.Method, "B's call gets its own sampling request once A's is done")
	b.send(`{"jsonrpc":"2.0","id":` + string(askB.ID) + `,"result":{"from":"B"}}`)
	resB := b.recv()
	assert.Equal(t, `"b"`, string(resB.ID))
	assert.JSONEq(t, `{"answer":{"from":"B"}}`, string(resB.Result))
	assert.Equal(t, int32(1), told.Load(), "a kind is remembered once")
}

// A request's kind is its tool, its prompt, or its method.
func TestKindOf(t *testing.T) {
	for frame, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{}}}`: "tools/call ask",
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a prompt"}}`:          "prompts/get a prompt",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}`:                    "tools/call",
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///x"}}`:       "resources/read",
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete"}`:                               "completion/complete",
	} {
		m, err := jsonrpc.Parse([]byte(frame))
		require.NoError(t, err)
		v := viewOf(m)
		assert.Equal(t, want, kindOf(&v), frame)
	}
}
