package mux

import (
	"encoding/json"
	"testing"

	"github.com/mcpmux/mcpmux/protocol"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A modern-opened server that lists a legacy session's revision in its
// supportedVersions gets that session's requests in that revision, and the
// sampling request it sends while serving one reaches that session, as
// from a legacy server; a modern session's requests stay 2026-07-28. (A
// server that lists only 2026-07-28 gets 2026-07-28 from every session:
// TestLegacySessionsOnModernOnlyServer.)
func TestLegacySessionOnPerRequestServer(t *testing.T) {
	h := newHarnessOn(t, modernServer("perrequest"), func(c *Config) { c.Protocol = ProtocolModern })
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	require.Equal(t, "modern", h.Status().Era)
	l := h.sessionWith("2025-06-18", samplingCaps)

	l.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"sample"}}`)
	ask := l.recv()
	require.Equal(t, "sampling/createMessage", ask.Method, "%s", ask.Frame)
	calls := h.srv.messages("tools/call")
	require.Len(t, calls, 1)
	meta := metaOf(t, calls[0])
	assert.JSONEq(t, `"2025-06-18"`, string(meta["io.modelcontextprotocol/protocolVersion"]))
	assert.JSONEq(t, samplingCaps, string(meta["io.modelcontextprotocol/clientCapabilities"]))
	l.send(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`)
	m := l.recv()
	assert.Equal(t, `"call"`, string(m.ID))
	assert.Contains(t, string(m.Result), `"text":"hi"`, "the server's answer, with the session's")

	mod := h.connect()
	mod.send(modern(`"m"`, "tools/call", `{"name":"echo"}`, "mod", `{}`))
	am := mod.recv()
	assert.Equal(t, `"m"`, string(am.ID), "%s", am.Frame)
	calls = h.srv.messages("tools/call")
	require.Len(t, calls, 2)
	assert.JSONEq(t, `"2026-07-28"`, string(metaOf(t, calls[1])["io.modelcontextprotocol/protocolVersion"]))
}

// Such a server reads no log level from a request in a legacy revision, so
// a legacy session's logging/setLevel reaches it as it would a legacy
// server: the most verbose level any session wants. A server that lists
// only 2026-07-28 gets none (TestLegacySessionsOnModernOnlyServer's server
// takes each request's level from its envelope).
func TestLegacySessionSetsTheLevelOfAPerRequestServer(t *testing.T) {
	h := newHarnessOn(t, modernServer("perrequest"), func(c *Config) { c.Protocol = ProtocolModern })
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	l := h.sessionWith("2025-06-18", samplingCaps)
	l.send(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"debug"}}`)
	m := l.recv()
	require.Equal(t, `"lvl"`, string(m.ID), "%s", m.Frame)
	require.Nil(t, m.Error, "%s", m.Frame)
	eventually(t, "the server was set to debug", func() bool {
		for _, f := range h.srv.messages("logging/setLevel") {
			var p struct {
				Level string            `json:"level"`
				Meta  map[string]string `json:"_meta"`
			}
			if json.Unmarshal(f.Params, &p) == nil && p.Level == "debug" {
				// In a legacy revision the server listed, the newest.
				return p.Meta["io.modelcontextprotocol/protocolVersion"] == protocol.LatestLegacy
			}
		}
		return false
	})
}

// What such a server logs at the level its connection was set goes to
// every legacy session whose level admits it, as from a legacy server,
// whatever else is in flight: a modern session's request that asked for a
// level after a legacy session's call does not take the messages that call
// caused (nothing in them names it); it hears them too, the latest modern
// request to ask.
func TestPerRequestServerLogsReachLegacySessions(t *testing.T) {
	h := newHarnessOn(t, modernServer("perrequest"), func(c *Config) { c.Protocol = ProtocolModern })
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	l := h.session("2025-06-18")
	l.send(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"debug"}}`)
	require.Equal(t, `"lvl"`, string(l.recv().ID))
	l.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"hang"}}`)
	eventually(t, "the legacy call at the server", func() bool { return len(h.srv.messages("tools/call")) == 1 })
	mod := h.connect()
	mod.send(withLevel(modern(`"m"`, "tools/call", `{"name":"hang"}`, "mod", `{}`), "info"))
	eventually(t, "the modern call at the server", func() bool { return len(h.srv.messages("tools/call")) == 2 })

	h.srv.current().reply([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"step 2"}}`))
	for name, c := range map[string]*testClient{"legacy": l, "modern": mod} {
		m := c.next()
		require.Equal(t, "notifications/message", m.Method, "%s: %s", name, m.Frame)
		assert.Contains(t, string(m.Params), "step 2", name)
	}
	h.srv.current().reply([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"step 3"}}`))
	m := l.next()
	require.Equal(t, "notifications/message", m.Method, "%s", m.Frame)
	assert.Contains(t, string(m.Params), "step 3")
	quiet(t, mod, "the modern request asked for info")
}
