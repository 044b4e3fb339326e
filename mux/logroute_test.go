package mux

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// withToken adds a progress token to a modern request's _meta.
func withToken(req, token string) string {
	return strings.Replace(req, `"_meta":{`, `"_meta":{"progressToken":`+token+`,`, 1)
}

// A log message whose _meta names its request (by the progress token
// mcpmux gave it) goes to that request's session alone, with the
// session's own token, at the level that request asked for; legacy
// sessions on the same server hear nothing of it. A message that names no
// request is routed as before.
func TestLogMessageGoesToTheRequestItNames(t *testing.T) {
	h := newHarness(t, nil)
	legacy := h.session("2025-11-25")
	legacy.send(`{"jsonrpc":"2.0","id":"lv","method":"logging/setLevel","params":{"level":"debug"}}`)
	assert.JSONEq(t, `{}`, string(legacy.answer().Result))
	a, b := h.connect(), h.connect()
	tokens := map[string]string{} // client -> the token the server got
	for i, c := range []struct {
		client      *testClient
		name, token string
		level       string
	}{{a, "A", `"tok-a"`, "info"}, {b, "B", `7`, "debug"}} {
		c.client.send(withToken(withLevel(modern(`"`+c.name+`"`, "tools/call", `{"name":"hang"}`, c.name, `{}`), c.level), c.token))
		eventually(t, c.name+"'s call at the server", func() bool { return len(h.srv.messages("tools/call")) == i+1 })
		m := h.srv.messages("tools/call")[i]
		span, ok := m.ParamsPath("_meta", "progressToken")
		require.True(t, ok, "%s", m.Frame)
		tokens[c.name] = string(m.Frame[span.Start:span.End])
	}
	require.Len(t, tokens, 2)
	require.NotEqual(t, tokens["A"], tokens["B"])
	p := h.srv.current()
	logAbout := func(level, token, data string) {
		meta := ""
		if token != "" {
			meta = `,"_meta":{"progressToken":` + token + `}`
		}
		p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"` + level + `","data":"` + data + `"` + meta + `}}`))
	}

	logAbout("info", tokens["A"], "about a")
	m := a.next()
	require.Equal(t, "notifications/message", m.Method, "%s", m.Frame)
	assert.JSONEq(t, `{"level":"info","data":"about a","_meta":{"progressToken":"tok-a"}}`, string(m.Params))
	logAbout("debug", tokens["B"], "about b")
	m = b.next()
	require.Equal(t, "notifications/message", m.Method, "%s", m.Frame)
	assert.JSONEq(t, `{"level":"debug","data":"about b","_meta":{"progressToken":7}}`, string(m.Params))
	logAbout("debug", tokens["A"], "below a's level")
	logAbout("error", "99999", "about no request in flight")
	quiet(t, legacy, "the legacy session hears nothing of the modern requests' messages")
	quiet(t, a, "a asked for info, and b's message is b's")
	quiet(t, b, "a's messages are a's")

	// One that names no request: every legacy session whose level admits
	// it, and the modern request that asked last.
	logAbout("warning", "", "about nothing")
	for _, c := range []*testClient{legacy, b} {
		m = c.next()
		assert.Equal(t, "notifications/message", m.Method, "%s", m.Frame)
		assert.Contains(t, string(m.Params), "about nothing")
	}
	quiet(t, a, "not the latest to ask")
	assert.Empty(t, h.srv.count(func(m *jsonrpc.Message) bool { return m.Method == "notifications/cancelled" }), "the calls are still in flight")
}

// On a modern server too: a message naming the first of two requests that
// asked goes to it, not to the latest.
func TestLogMessageNamingItsRequestOnModernServer(t *testing.T) {
	h := newHarnessOn(t, modernServer("modern"), nil)
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	a, b := h.connect(), h.connect()
	a.send(withToken(withLevel(modern(`"a"`, "tools/call", `{"name":"hang"}`, "A", `{}`), "debug"), `"tok-a"`))
	eventually(t, "a's call at the server", func() bool { return len(h.srv.messages("tools/call")) == 1 })
	b.send(withLevel(modern(`"b"`, "tools/call", `{"name":"hang"}`, "B", `{}`), "debug"))
	eventually(t, "b's call at the server", func() bool { return len(h.srv.messages("tools/call")) == 2 })
	span, ok := h.srv.messages("tools/call")[0].ParamsPath("_meta", "progressToken")
	require.True(t, ok)
	token := string(h.srv.messages("tools/call")[0].Frame[span.Start:span.End])

	h.srv.current().reply([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"about a","_meta":{"progressToken":` + token + `}}}`))
	m := a.next()
	require.Equal(t, "notifications/message", m.Method, "%s", m.Frame)
	assert.JSONEq(t, `{"level":"info","data":"about a","_meta":{"progressToken":"tok-a"}}`, string(m.Params))
	quiet(t, b, "b asked last, but the message names a's request")
}
