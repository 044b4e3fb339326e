package mux

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/session"
)

// oneRequest attaches a session that carries one request, as the
// 2026-07-28 HTTP binding makes one per POST.
func (h *harness) oneRequest() *testClient {
	h.t.Helper()
	return h.pipe(func(conn net.Conn) {
		h.hub.Serve(h.ctx, session.NewStream(conn, h.hub.MaxMessageBytes()), session.Peer{Transport: "http", OneRequest: true})
	})
}

// TestParkedInputOutlivesItsRequestSession: on a legacy server, a modern
// request's input_required is answered on a session of one request that
// then ends; the upstream request stays parked (not cancelled), and the
// retry, on a session of its own, carries the input and gets the answer.
// A session that is not of one request cannot take the state up.
func TestParkedInputOutlivesItsRequestSession(t *testing.T) {
	h := newHarness(t, nil)
	caps := `{"elicitation":{}}`
	first := h.oneRequest()
	first.send(modern(`"call"`, "tools/call", `{"name":"elicit"}`, "M", caps))
	m := first.recv()
	require.Equal(t, `"call"`, string(m.ID), "%s", m.Frame)
	var ir struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &ir))
	require.Equal(t, "input_required", ir.ResultType)
	require.Len(t, ir.InputRequests, 1)
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	first.conn.Close()
	eventually(t, "the first session ends", func() bool { return len(h.hub.sessions.all()) == 0 })
	assert.Empty(t, h.srv.messages("notifications/cancelled"), "the parked call was not cancelled with its session")

	retry := modern(`"retry"`, "tools/call", `{"name":"elicit","inputResponses":{"`+key+`":{"action":"accept","content":{"n":"M"}}},"requestState":"`+ir.RequestState+`"}`, "M", caps)
	other := h.connect()
	other.send(retry)
	code, reason := errorOf(t, other.recv())
	assert.Equal(t, []any{-32602, "invalid_request_state"}, []any{code, reason}, "a session of its own cannot take it up")

	second := h.oneRequest()
	second.send(retry)
	m = second.recv()
	assert.Equal(t, `"retry"`, string(m.ID))
	assert.JSONEq(t, `{"answer":{"action":"accept","content":{"n":"M"}},"resultType":"complete"}`, string(m.Result))
	second.conn.Close()
	eventually(t, "the second session ends with nothing in flight", func() bool { return len(h.hub.sessions.all()) == 1 && h.hub.flights.len() == 0 })
}

// TestUndeclaredCapabilityUnderTheTurn: under "serialize" a legacy server's
// sampling request is exactly the turn holder's; when that is a modern
// request that did not declare sampling, it is refused with -32021 naming
// what it lacked and cancelled at the server, and no other session (a
// legacy one that declared sampling) is asked in its place.
func TestUndeclaredCapabilityUnderTheTurn(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ServerRequests = ServerRequestsSerialize })
	legacy := h.sessionWith("2025-11-25", `{"sampling":{}}`)
	m := h.oneRequest()
	m.send(modern(`"s"`, "tools/call", `{"name":"sample"}`, "M", `{}`))
	ans := m.recv()
	require.Equal(t, `"s"`, string(ans.ID), "%s", ans.Frame)
	code, reason := errorOf(t, ans)
	assert.Equal(t, []any{-32021, "missing_capability"}, []any{code, reason})
	var e struct {
		Data struct {
			RequiredCapabilities map[string]json.RawMessage `json:"requiredCapabilities"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(ans.Error, &e))
	assert.JSONEq(t, `{}`, string(e.Data.RequiredCapabilities["sampling"]), "%s", ans.Error)
	eventually(t, "the call is cancelled at the server", func() bool { return len(h.srv.messages("notifications/cancelled")) == 1 })

	legacy.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
	next := legacy.recv()
	assert.Equal(t, `"after"`, string(next.ID), "the legacy session was not asked to sample: %s", next.Frame)
}
