package mux

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// modern builds a 2026-07-28 request: the envelope names the client and
// what it declared; params go around it.
func modern(id, method, params, client, caps string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"` + client + `","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + strings.TrimPrefix(params, "{")
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`
}

// withLevel adds a log level to a modern request's envelope.
func withLevel(req, level string) string {
	return strings.Replace(req, `"_meta":{`, `"_meta":{"io.modelcontextprotocol/logLevel":"`+level+`",`, 1)
}

func modernServer(era string) *fakeServer {
	f := newFakeServer()
	f.era = era
	return f
}

// metaOf decodes the _meta of a message's params.
func metaOf(t *testing.T, m *jsonrpc.Message) map[string]json.RawMessage {
	t.Helper()
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(m.Params, &p), "%s", m.Frame)
	return p.Meta
}

func TestModernSessionOnModernServer(t *testing.T) {
	h := newHarnessOn(t, modernServer("modern"), nil)
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	st := h.Status()
	assert.Equal(t, []string{"2026-07-28", "modern"}, []string{st.Protocol, st.Era})
	a := h.connect()

	a.send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}`)
	m := a.recv()
	assert.Contains(t, string(m.Result), `"fake-modern"`)
	assert.Contains(t, string(m.Result), `"supportedVersions":["2026-07-28"`)
	assert.Len(t, h.srv.messages("server/discover"), 1, "answered from the cache: the server saw mcpmux's probe only")

	// Forwarded with the session's own envelope; only the id is mcpmux's.
	a.send(modern(`7`, "tools/call", `{"name":"echo","arguments":{"x":1}}`, "A", `{}`))
	m = a.recv()
	assert.Equal(t, `7`, string(m.ID))
	assert.Contains(t, string(m.Result), `"io.modelcontextprotocol/clientInfo":{"name":"A","version":"1"}`)
	assert.Equal(t, StateReady, h.Status().State)
	assert.Equal(t, "modern", h.Status().SessionList[0].Era)

	// Removed methods, a missing envelope, another revision.
	a.send(modern(`8`, "logging/setLevel", `{"level":"debug"}`, "A", `{}`))
	code, reason := errorOf(t, a.recv())
	assert.Equal(t, []any{-32601, "method_not_found"}, []any{code, reason})
	a.send(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`)
	code, _ = errorOf(t, a.recv())
	assert.Equal(t, -32602, code, "a modern session's request needs its envelope")
	a.send(strings.Replace(modern(`10`, "tools/list", "", "A", `{}`), "2026-07-28", "2099-01-01", 1))
	m = a.recv()
	code, reason = errorOf(t, m)
	assert.Equal(t, []any{-32022, "unsupported_version"}, []any{code, reason})
	assert.Contains(t, string(m.Error), `"supported":["2026-07-28"]`)

	// A log message goes to the session whose request asked for its level,
	// and to no request that did not ask.
	b := h.connect()
	b.send(modern(`"b"`, "tools/call", `{"name":"log"}`, "B", `{}`))
	assert.Equal(t, `"b"`, string(b.recv().ID), "B asked for no level: no message")
	a.send(withLevel(modern(`"a"`, "tools/call", `{"name":"log"}`, "A", `{}`), "info"))
	m = a.recv()
	assert.Equal(t, "notifications/message", m.Method)
	assert.Equal(t, `"a"`, string(a.recv().ID))
	quiet(t, b, "B")

	// input_required passes through untouched: the state is the server's.
	a.send(modern(`11`, "tools/call", `{"name":"elicit"}`, "A", `{"elicitation":{}}`))
	m = a.recv()
	assert.Contains(t, string(m.Result), `"resultType":"input_required"`)
	assert.Contains(t, string(m.Result), `"requestState":"round-1"`)
	a.send(modern(`12`, "tools/call", `{"name":"elicit","inputResponses":{"in":{"action":"accept","content":{"n":"a"}}},"requestState":"round-1"}`, "A", `{"elicitation":{}}`))
	m = a.recv()
	assert.Equal(t, `12`, string(m.ID))
	assert.JSONEq(t, `{"resultType":"complete","answer":{"action":"accept","content":{"n":"a"}},"state":"round-1"}`, string(m.Result))
}

// Two modern sessions using the same listen id on one server each get only
// their own notifications, tagged with their own id; ending one leaves the
// other; the server ending a listen is told to its owner alone.
func TestListensOfModernSessionsStayApart(t *testing.T) {
	h := newHarnessOn(t, modernServer("modern"), nil)
	a, b := h.connect(), h.connect()
	listen := modern(`"sub-1"`, "subscriptions/listen", `{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["test://r"]}}`, "x", `{}`)
	for _, c := range []*testClient{a, b} {
		c.send(listen)
		m := c.recv()
		require.Equal(t, "notifications/subscriptions/acknowledged", m.Method, "%s", m.Frame)
		assert.JSONEq(t, `"sub-1"`, string(metaOf(t, m)["io.modelcontextprotocol/subscriptionId"]))
	}
	p := h.srv.current()
	eventually(t, "two listens at the server", func() bool { return p.openListens() == 2 })

	toucher := h.connect()
	touch := func() {
		toucher.send(modern(`"t"`, "tools/call", `{"name":"touch"}`, "t", `{}`))
		require.Equal(t, `"t"`, string(toucher.recv().ID))
	}
	touch()
	for name, c := range map[string]*testClient{"A": a, "B": b} {
		got := map[string]string{}
		for range 2 {
			m := c.recv()
			got[m.Method] = string(metaOf(t, m)["io.modelcontextprotocol/subscriptionId"])
		}
		assert.Equal(t, map[string]string{"notifications/resources/updated": `"sub-1"`, "notifications/tools/list_changed": `"sub-1"`}, got, name)
		quiet(t, c, name+" got its own two notifications and no more")
	}
	quiet(t, toucher, "no notification to a session that did not listen")

	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub-1"}}`)
	eventually(t, "A's listen ended at the server", func() bool { return p.openListens() == 1 })
	touch()
	assert.Equal(t, "notifications/resources/updated", b.recv().Method)
	assert.Equal(t, "notifications/tools/list_changed", b.recv().Method)
	quiet(t, a, "A ended its listen")

	// The server ends B's listen: B is told, under its own id; A is not.
	ids := p.listenIDs()
	require.Len(t, ids, 1, "B's listen is the one left")
	require.True(t, p.endListen(ids[0]))
	m := b.recv()
	assert.Equal(t, "notifications/cancelled", m.Method)
	assert.JSONEq(t, `{"requestId":"sub-1"}`, string(m.Params))
	quiet(t, a, "not A's listen")
	quiet(t, b, "nothing more for B")
}

// The bridge up: legacy sessions on a modern-only server. The server sees
// each request with that session's own clientInfo and capabilities; input
// the server needs becomes a request to that very session.
func TestLegacySessionsOnModernOnlyServer(t *testing.T) {
	h := newHarnessOn(t, modernServer("modern"), nil)
	l1 := h.sessionWith("2025-06-18", `{"elicitation":{}}`)
	l2 := h.sessionWith("2025-11-25", `{}`)
	assert.Len(t, h.srv.messages("initialize"), 1, "the server saw mcpmux's one check for the legacy era, which it refused, and none of the sessions' own")
	assert.Equal(t, "modern", h.Status().Era)

	l1.send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo"}}`)
	m := l1.recv()
	assert.Equal(t, `"e"`, string(m.ID))
	calls := h.srv.messages("tools/call")
	require.Len(t, calls, 1)
	meta := metaOf(t, calls[0])
	assert.JSONEq(t, `"2026-07-28"`, string(meta["io.modelcontextprotocol/protocolVersion"]))
	assert.JSONEq(t, `{"name":"test","version":"0"}`, string(meta["io.modelcontextprotocol/clientInfo"]))
	assert.JSONEq(t, `{"elicitation":{}}`, string(meta["io.modelcontextprotocol/clientCapabilities"]))

	// L2 declared no elicitation: the server says so, and L2 gets an error.
	l2.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"elicit"}}`)
	code, _ := errorOf(t, l2.recv())
	assert.Equal(t, -32021, code)

	// L1's call needs input: L1, and only L1, is asked; the call goes up
	// again with the answer and the server's state, under a new id.
	l1.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"elicit","_meta":{"progressToken":"p"}}}`)
	ask := l1.recv()
	require.Equal(t, "elicitation/create", ask.Method, "%s", ask.Frame)
	l1.send(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"action":"accept","content":{"n":"L1"}}}`)
	m = l1.recv()
	assert.Equal(t, `"call"`, string(m.ID))
	assert.JSONEq(t, `{"resultType":"complete","answer":{"action":"accept","content":{"n":"L1"}},"state":"round-1"}`, string(m.Result))
	quiet(t, l2, "L2 was asked nothing")
	elicits := h.srv.count(func(m *jsonrpc.Message) bool { return strings.Contains(string(m.Params), `"elicit"`) })
	assert.Equal(t, 3, elicits, "L2's, and L1's twice")
	retry := h.srv.messages("tools/call")[3]
	assert.Contains(t, string(retry.Params), `"requestState":"round-1"`)
	assert.NotEqual(t, string(h.srv.messages("tools/call")[2].ID), string(retry.ID), "a new id for the retry")

	// setLevel becomes the level of each request; the message goes to the
	// session whose request asked.
	l1.send(`{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"debug"}}`)
	assert.JSONEq(t, `{}`, string(l1.recv().Result))
	assert.Empty(t, h.srv.messages("logging/setLevel"))
	l1.send(`{"jsonrpc":"2.0","id":"log","method":"tools/call","params":{"name":"log"}}`)
	assert.Equal(t, "notifications/message", l1.recv().Method)
	assert.Equal(t, `"log"`, string(l1.recv().ID))
	l2.send(`{"jsonrpc":"2.0","id":"log","method":"tools/call","params":{"name":"log"}}`)
	assert.Equal(t, `"log"`, string(l2.recv().ID), "L2 set no level: no message")

	// resources/subscribe becomes mcpmux's own listen; its updates go to
	// the holders, its list changes to every legacy session.
	l1.send(`{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"test://r"}}`)
	assert.JSONEq(t, `{}`, string(l1.recv().Result))
	p := h.srv.current()
	eventually(t, "mcpmux's listen names test://r", func() bool {
		ls := h.srv.messages("subscriptions/listen")
		return len(ls) > 0 && strings.Contains(string(ls[len(ls)-1].Params), `"resourceSubscriptions":["test://r"]`) && p.openListens() == 1
	})
	l2.send(`{"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"touch"}}`)
	seen := map[string]bool{}
	for range 2 {
		m := l2.recv()
		seen[m.Method+string(m.ID)] = true
	}
	assert.Equal(t, map[string]bool{"notifications/tools/list_changed": true, `"t"`: true}, seen, "L2: the list change and its answer")
	got := map[string]bool{}
	for range 2 {
		m := l1.recv()
		got[m.Method] = true
		assert.NotContains(t, string(m.Frame), "subscriptionId", "a legacy session hears nothing of mcpmux's listen")
	}
	assert.Equal(t, map[string]bool{"notifications/resources/updated": true, "notifications/tools/list_changed": true}, got)
	quiet(t, l2, "L2 subscribed to nothing")
}

// The bridge down: a modern session on a legacy server.
func TestModernSessionOnLegacyServer(t *testing.T) {
	h := newHarness(t, nil)
	m0 := h.connect()
	m0.send(modern(`1`, "tools/call", `{"name":"echo"}`, "M", `{}`))
	m := m0.recv()
	assert.Contains(t, string(m.Result), `"resultType":"complete"`)
	sent := string(h.srv.messages("tools/call")[0].Params)
	for _, k := range []string{"protocolVersion", "clientInfo", "logLevel"} {
		assert.NotContains(t, sent, "io.modelcontextprotocol/"+k, "the envelope's %s stays away from a legacy server", k)
	}
	assert.Contains(t, sent, `"io.modelcontextprotocol/clientCapabilities":{}`, "the request's own capabilities go with it")

	// A listen served by mcpmux: acknowledged, joined to the counted
	// subscribe, its notifications tagged with the session's id.
	m0.send(modern(`"L"`, "subscriptions/listen", `{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///x"]}}`, "M", `{}`))
	ack := m0.recv()
	require.Equal(t, "notifications/subscriptions/acknowledged", ack.Method)
	assert.JSONEq(t, `{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///x"]},"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}`, string(ack.Params))
	eventually(t, "the subscribe upstream", func() bool { return len(h.srv.messages("resources/subscribe")) == 1 })
	legacy := h.session("2025-11-25")
	p := h.srv.current()
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///x"}}`))
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	for _, want := range []string{"notifications/resources/updated", "notifications/tools/list_changed"} {
		n := m0.recv()
		assert.Equal(t, want, n.Method)
		assert.JSONEq(t, `"L"`, string(metaOf(t, n)["io.modelcontextprotocol/subscriptionId"]))
	}
	assert.Equal(t, "notifications/tools/list_changed", legacy.recv().Method, "legacy sessions as before")
	m0.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`)
	eventually(t, "the unsubscribe upstream", func() bool { return len(h.srv.messages("resources/unsubscribe")) == 1 })

	// The server's elicitation completes the call with input_required.
	caps := `{"elicitation":{}}`
	m0.send(modern(`"call"`, "tools/call", `{"name":"elicit"}`, "M", caps))
	m = m0.recv()
	require.Equal(t, `"call"`, string(m.ID), "%s", m.Frame)
	var ir struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &ir))
	require.Equal(t, "input_required", ir.ResultType)
	require.Len(t, ir.InputRequests, 1)
	var key string
	for k, v := range ir.InputRequests {
		key = k
		assert.Equal(t, "elicitation/create", v.Method)
	}
	retry := func(c *testClient, id, state string) *jsonrpc.Message {
		c.send(modern(id, "tools/call", `{"name":"elicit","inputResponses":{"`+key+`":{"action":"accept","content":{"n":"M"}}},"requestState":"`+state+`"}`, "M", caps))
		return c.recv()
	}
	// Forged, and foreign: refused, and nothing reaches the server.
	before := len(h.srv.messages("tools/call"))
	code, reason := errorOf(t, retry(m0, `"forged"`, "mcpmux1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"))
	assert.Equal(t, []any{-32602, "invalid_request_state"}, []any{code, reason})
	other := h.connect()
	code, reason = errorOf(t, retry(other, `"stolen"`, ir.RequestState))
	assert.Equal(t, []any{-32602, "invalid_request_state"}, []any{code, reason})
	assert.Equal(t, before, len(h.srv.messages("tools/call")))

	m = retry(m0, `"retry"`, ir.RequestState)
	assert.Equal(t, `"retry"`, string(m.ID))
	assert.JSONEq(t, `{"answer":{"action":"accept","content":{"n":"M"}},"resultType":"complete"}`, string(m.Result))
	code, reason = errorOf(t, retry(m0, `"again"`, ir.RequestState))
	assert.Equal(t, []any{-32602, "invalid_request_state"}, []any{code, reason}, "a requestState is used once")

	// A request that did not declare elicitation is never asked: it holds
	// the turn (the server sent a request of its own before), so it is
	// exactly the cause, and is refused as a modern server refuses it.
	m0.send(modern(`"plain"`, "tools/call", `{"name":"elicit"}`, "M", `{}`))
	m = m0.recv()
	assert.Equal(t, `"plain"`, string(m.ID))
	code, reason = errorOf(t, m)
	assert.Equal(t, []any{-32021, "missing_capability"}, []any{code, reason}, "%s", m.Frame)
	// The answer may reach the session before the cancellation reaches the
	// server.
	eventually(t, "the refused call cancelled at the server", func() bool {
		return len(h.srv.messages("notifications/cancelled")) > 0
	})
	assert.Contains(t, string(h.srv.messages("notifications/cancelled")[0].Params), "capability", "and cancelled at the server")
}

// A restarted modern server: the modern sessions' listens end with the
// process (they listen again), mcpmux's own listen is opened anew.
func TestModernServerRestartEndsListens(t *testing.T) {
	h := newHarnessOn(t, modernServer("modern"), nil)
	a := h.connect()
	a.send(modern(`"sub"`, "subscriptions/listen", `{"notifications":{"toolsListChanged":true}}`, "A", `{}`))
	require.Equal(t, "notifications/subscriptions/acknowledged", a.recv().Method)
	l := h.session("2025-11-25")
	eventually(t, "mcpmux's listen", func() bool { return h.srv.current().openListens() == 2 })

	h.srv.current().crash("exited")
	m := a.answer()
	assert.Equal(t, `"sub"`, string(m.ID))
	_, reason := errorOf(t, m)
	assert.Equal(t, "upstream_exited", reason)
	eventually(t, "a new process with mcpmux's listen", func() bool {
		return h.srv.started() == 2 && h.srv.current().openListens() == 1
	})
	l.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, `1`, string(l.answer().ID))
}

// A server that serves both eras (the go-sdk does, request by request) is
// opened legacy in "auto", and never sent server/discover: such a server
// may take it to mean the whole connection is modern and stop sending the
// requests its tools need. Its legacy sessions get them; its modern
// sessions are served through the bridge. protocol = "modern" opens it
// modern.
func TestServerOfBothErasIsOpenedLegacy(t *testing.T) {
	h := newHarnessOn(t, modernServer("dual"), nil)
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	assert.Equal(t, "legacy", h.Status().Era)
	assert.Empty(t, h.srv.messages("server/discover"))
	legacy := h.sessionWith("2025-11-25", samplingCaps)
	mod := h.connect()
	legacy.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"elicit"}}`)
	req := legacy.recv()
	require.Equal(t, "elicitation/create", req.Method, "%s", req.Frame)
	legacy.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"action":"decline"}}`)
	assert.JSONEq(t, `{"answer":{"action":"decline"}}`, string(legacy.recv().Result))
	mod.send(modern(`1`, "tools/call", `{"name":"elicit"}`, "M", `{"elicitation":{}}`))
	m := mod.recv()
	assert.Contains(t, string(m.Result), `"resultType":"input_required"`)
	assert.Contains(t, string(m.Result), `"requestState":"mcpmux1.`, "the bridge's, from the server's own request")

	hm := newHarnessOn(t, modernServer("dual"), func(c *Config) { c.Protocol = ProtocolModern })
	eventually(t, "ready", func() bool { return hm.Status().State == StateReady })
	assert.Equal(t, "modern", hm.Status().Era)
	assert.Empty(t, hm.srv.messages("initialize"))
}

// A listen mcpmux serves for a legacy server is acknowledged once the
// server has answered its subscribe, so that a call the client makes on
// seeing the acknowledgement cannot reach a server that runs requests
// concurrently before the subscribe is in place.
func TestListenAcknowledgedAfterSubscribe(t *testing.T) {
	h := newHarness(t, nil)
	m0 := h.connect()
	m0.send(modern(`"L"`, "subscriptions/listen", `{"notifications":{"resourceSubscriptions":["file:///held"]}}`, "M", `{}`))
	eventually(t, "the subscribe upstream", func() bool { return len(h.srv.messages("resources/subscribe")) == 1 })
	// The subscribe is held unanswered: nothing may have been sent yet.
	m0.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	frame, err := m0.r.Read()
	require.Error(t, err, "the listen was acknowledged before the server answered its subscribe: %s", frame)
	require.True(t, h.srv.releaseHeld(), "the subscribe was held")
	ack := m0.recv()
	assert.Equal(t, "notifications/subscriptions/acknowledged", ack.Method, "%s", ack.Frame)
}

// A server that ends mcpmux's own listen as soon as it is opened gets it
// again after a delay that doubles, not in a loop as fast as it answers.
func TestOwnedListenEndedAtOnceIsReopenedWithBackoff(t *testing.T) {
	srv := modernServer("modern")
	srv.listenEnd = "answer"
	h := newHarnessOn(t, srv, nil)
	h.session("2025-11-25")
	eventually(t, "mcpmux's listen", func() bool { return len(h.srv.messages("subscriptions/listen")) >= 1 })
	start := time.Now()
	eventually(t, "two reopenings", func() bool { return len(h.srv.messages("subscriptions/listen")) >= 3 })
	assert.GreaterOrEqual(t, time.Since(start), listenRetryMin+2*listenRetryMin, "the waits before the two reopenings")
}

// A server that refuses mcpmux's listen is not asked again until it
// restarts, however many legacy sessions join.
func TestOwnedListenRefusedIsNotAskedAgain(t *testing.T) {
	srv := modernServer("modern")
	srv.listenEnd = "refuse"
	h := newHarnessOn(t, srv, nil)
	a := h.session("2025-11-25")
	eventually(t, "mcpmux's listen", func() bool { return len(h.srv.messages("subscriptions/listen")) == 1 })
	b := h.session("2025-06-18")
	b.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, `1`, string(b.answer().ID))
	assert.Len(t, h.srv.messages("subscriptions/listen"), 1)

	h.srv.current().crash("exited")
	eventually(t, "the restarted server asked again", func() bool { return len(h.srv.messages("subscriptions/listen")) == 2 })
	a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, `2`, string(a.answer().ID))
}

func TestOwnedListenDelays(t *testing.T) {
	var o ownedListen
	now := time.Now()
	open := func(up int64) {
		gen, _ := o.change(fmt.Sprint(up))
		o.opened(gen, up)
		o.since = now
	}
	var waits []time.Duration
	for up := int64(1); up <= 10; up++ {
		open(up)
		wait, ok := o.ended(up, false, now.Add(time.Millisecond))
		require.True(t, ok)
		waits = append(waits, wait)
	}
	assert.Equal(t, []time.Duration{listenRetryMin, 2 * listenRetryMin, 4 * listenRetryMin, 8 * listenRetryMin, 16 * listenRetryMin, 32 * listenRetryMin, 64 * listenRetryMin, 128 * listenRetryMin, listenRetryMax, listenRetryMax}, waits)

	open(11)
	_, ok := o.ended(12, false, now)
	assert.False(t, ok, "not the open listen")
	wait, ok := o.ended(11, false, now.Add(listenSettled))
	assert.True(t, ok)
	assert.Zero(t, wait, "a listen that lasted is reopened at once")

	open(13)
	_, ok = o.ended(13, true, now)
	assert.True(t, ok)
	assert.True(t, o.held(), "refused")
	o.lost()
	assert.False(t, o.held(), "a new process is asked again")
}
