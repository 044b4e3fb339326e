package mux

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// inputOf reads an input_required answer: its requestState and its one key.
func inputOf(t *testing.T, m *jsonrpc.Message) (state, key string) {
	t.Helper()
	var ir struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &ir), "%s", m.Frame)
	require.Equal(t, "input_required", ir.ResultType, "%s", m.Frame)
	require.Len(t, ir.InputRequests, 1)
	for k := range ir.InputRequests {
		key = k
	}
	return ir.RequestState, key
}

// TestParkedInputFreesTheTurn: under "serialize", a modern request parked
// on a legacy server for its client's input does not hold the turn while
// it waits (its client may never retry: the default server_request_timeout
// is a minute, and recv gives up after 5 s), so the next call is served at
// once and its own server request reaches it; the retry, coming while that
// call holds the turn, waits for it before its input reaches the server,
// and then completes.
func TestParkedInputFreesTheTurn(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ServerRequests = ServerRequestsSerialize })
	caps := `{"elicitation":{}}`
	first := h.oneRequest()
	first.send(modern(`"call"`, "tools/call", `{"name":"elicit"}`, "M", caps))
	m := first.recv()
	require.Equal(t, `"call"`, string(m.ID), "%s", m.Frame)
	state, key := inputOf(t, m)
	first.conn.Close()

	legacy := h.sessionWith("2025-11-25", `{"sampling":{}}`)
	legacy.send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"sample"}}`)
	ask := legacy.recv()
	require.Equal(t, "sampling/createMessage", ask.Method, "the next call was served while the first was parked: %s", ask.Frame)

	answeredElicitation := func() int {
		return h.srv.count(func(m *jsonrpc.Message) bool { return m.Method == "" && string(m.ID) == `"ask-1"` })
	}
	retry := h.oneRequest()
	retry.send(modern(`"retry"`, "tools/call", `{"name":"elicit","inputResponses":{"`+key+`":{"action":"accept","content":{"n":"M"}}},"requestState":"`+state+`"}`, "M", caps))
	eventually(t, "the retry waits for the turn", func() bool {
		_, waiting := h.hub.gates.turn.state()
		return len(waiting) == 1
	})
	assert.Zero(t, answeredElicitation(), "the input reached the server while another call held the turn")

	legacy.send(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}}`)
	m = legacy.recv()
	require.Equal(t, `"s"`, string(m.ID), "%s", m.Frame)
	assert.Contains(t, string(m.Result), `"text":"hi"`)

	m = retry.recv()
	require.Equal(t, `"retry"`, string(m.ID), "%s", m.Frame)
	assert.JSONEq(t, `{"answer":{"action":"accept","content":{"n":"M"}},"resultType":"complete"}`, string(m.Result))
	assert.Equal(t, 1, answeredElicitation())
	eventually(t, "nothing holds the turn or is in flight", func() bool {
		holders, waiting := h.hub.gates.turn.state()
		return len(holders) == 0 && len(waiting) == 0 && h.hub.reqs.Len() == 0
	})
}
