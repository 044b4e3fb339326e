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
	eventually(t, "the second session ends with nothing in flight", func() bool { return len(h.hub.sessions.all()) == 1 && h.hub.reqs.Len() == 0 })
}
