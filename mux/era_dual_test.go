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
