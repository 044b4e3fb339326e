package mux

import (
	"bytes"
	"encoding/json"
	"strings"
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
		_, waiting := h.hub.flights.turnState()
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
		holders, waiting := h.hub.flights.turnState()
		return len(holders) == 0 && len(waiting) == 0 && h.hub.flights.len() == 0
	})
}

// TestLegacyServersOwnInputRequests: a legacy server's answer that asks for
// input in its own words (inputRequests, requestState: a server of both
// eras opened legacy does so for a later round) reaches a modern session as
// input_required, never as complete; the retry carries the server's own
// requestState, which is the server's to check, so it goes to the server.
func TestLegacyServersOwnInputRequests(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connect()
	caps := `{"elicitation":{}}`
	c.send(modern(`"call"`, "tools/call", `{"name":"hang"}`, "M", caps))
	var up json.RawMessage
	eventually(t, "the call reaches the server", func() bool {
		calls := h.srv.messages("tools/call")
		if len(calls) == 1 {
			up = calls[0].ID
		}
		return up != nil
	})
	h.srv.current().reply(jsonrpc.Response(up, json.RawMessage(`{"content":[],"inputRequests":{"step2":{"method":"elicitation/create","params":{"message":"color?","requestedSchema":{"type":"object"}}}},"requestState":"round=2"}`)))
	m := c.recv()
	require.Equal(t, `"call"`, string(m.ID), "%s", m.Frame)
	state, key := inputOf(t, m)
	assert.Equal(t, []string{"round=2", "step2"}, []string{state, key}, "the server's own state and key")
	assert.NotContains(t, string(m.Result), "ttlMs")

	c.send(modern(`"retry"`, "tools/call", `{"name":"echo","inputResponses":{"step2":{"action":"accept","content":{"color":"blue"}}},"requestState":"round=2"}`, "M", caps))
	m = c.recv()
	require.Equal(t, `"retry"`, string(m.ID), "%s", m.Frame)
	assert.Contains(t, string(m.Result), `"resultType":"complete"`)
	calls := h.srv.messages("tools/call")
	require.Len(t, calls, 2)
	assert.Contains(t, string(calls[1].Params), `"requestState":"round=2"`, "the retry went to the server with its state")

	// An empty inputRequests asks for nothing: complete, as before.
	c.send(modern(`"empty"`, "tools/call", `{"name":"hang"}`, "M", caps))
	eventually(t, "the third call reaches the server", func() bool { return len(h.srv.messages("tools/call")) == 3 })
	h.srv.current().reply(jsonrpc.Response(h.srv.messages("tools/call")[2].ID, json.RawMessage(`{"content":[],"inputRequests":{}}`)))
	m = c.recv()
	require.Equal(t, `"empty"`, string(m.ID), "%s", m.Frame)
	assert.Contains(t, string(m.Result), `"resultType":"complete"`)
}

// TestRootsFromTheModernCause: under "serialize", with no roots of its own
// (none configured, roots not gathered from sessions), mcpmux puts a legacy
// server's roots/list to the modern request that holds the turn, as an
// input request, when that request declared roots; one that did not is
// refused with -32021 naming roots, and the call is cancelled at the server.
func TestRootsFromTheModernCause(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ServerRequests = ServerRequestsSerialize })
	caps := `{"roots":{"listChanged":true}}`
	c := h.connect()
	c.send(modern(`"call"`, "tools/call", `{"name":"roots"}`, "M", caps))
	m := c.recv()
	require.Equal(t, `"call"`, string(m.ID), "%s", m.Frame)
	state, key := inputOf(t, m)
	assert.Contains(t, string(m.Result), `"method":"roots/list"`)

	c.send(modern(`"retry"`, "tools/call", `{"name":"roots","inputResponses":{"`+key+`":{"roots":[{"uri":"file:///r"}]}},"requestState":"`+state+`"}`, "M", caps))
	m = c.recv()
	require.Equal(t, `"retry"`, string(m.ID), "%s", m.Frame)
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///r"}]},"resultType":"complete"}`, string(m.Result))

	c.send(modern(`"plain"`, "tools/call", `{"name":"roots"}`, "M", `{}`))
	m = c.recv()
	require.Equal(t, `"plain"`, string(m.ID), "%s", m.Frame)
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{-32021, "missing_capability"}, []any{code, reason}, "%s", m.Frame)
	assert.Contains(t, string(m.Error), `"requiredCapabilities":{"roots":{}}`)
	eventually(t, "the refused call cancelled at the server", func() bool { return len(h.srv.messages("notifications/cancelled")) == 1 })
}

// TestConcurrentInputRequestsOneRound: a legacy server that asks for three
// inputs of one modern request at once (the go-sdk's shim for a legacy
// connection sends every input request of a round from a goroutine of its
// own) gets them put to the session as one input_required round with
// three entries, not one entry and two requests for a call already
// answered; the one retry answers all three at the server, and the call
// completes with the three answers.
func TestConcurrentInputRequestsOneRound(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ServerRequests = ServerRequestsSerialize })
	caps := `{"elicitation":{},"sampling":{},"roots":{"listChanged":true}}`
	c := h.connect()
	c.send(modern(`"call"`, "tools/call", `{"name":"multi"}`, "M", caps))
	m := c.recv()
	require.Equal(t, `"call"`, string(m.ID), "%s", m.Frame)
	var ir struct {
		ResultType    string `json:"resultType"`
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
		RequestState string `json:"requestState"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &ir), "%s", m.Frame)
	require.Equal(t, "input_required", ir.ResultType, "%s", m.Frame)
	methods := map[string]string{}
	answers := map[string]string{
		"elicitation/create":     `{"action":"accept","content":{"n":"M"}}`,
		"sampling/createMessage": `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`,
		"roots/list":             `{"roots":[{"uri":"file:///r"}]}`,
	}
	var responses []string
	for key, in := range ir.InputRequests {
		methods[in.Method] = key
		responses = append(responses, `"`+key+`":`+answers[in.Method])
	}
	assert.Len(t, methods, 3, "one round asks for all three inputs, by three keys: %s", m.Frame)
	for method := range answers {
		assert.Contains(t, methods, method, "%s", m.Frame)
	}
	assert.Zero(t, h.srv.count(func(m *jsonrpc.Message) bool { return m.Kind == jsonrpc.KindError }), "no input request of the server was refused")

	c.send(modern(`"retry"`, "tools/call", `{"name":"multi","inputResponses":{`+strings.Join(responses, ",")+`},"requestState":"`+ir.RequestState+`"}`, "M", caps))
	m = c.recv()
	require.Equal(t, `"retry"`, string(m.ID), "%s", m.Frame)
	var res struct {
		ResultType string            `json:"resultType"`
		Answers    []json.RawMessage `json:"answers"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &res), "%s", m.Frame)
	assert.Equal(t, "complete", res.ResultType)
	require.Len(t, res.Answers, 3, "%s", m.Frame)
	got := map[string]bool{}
	for _, a := range res.Answers {
		got[string(a)] = true
	}
	for method, a := range answers {
		assert.True(t, got[string(compactJSON(t, a))], "the server got the session's answer to %s: %s", method, m.Frame)
	}
	eventually(t, "nothing holds the turn or is in flight", func() bool {
		holders, waiting := h.hub.flights.turnState()
		return len(holders) == 0 && len(waiting) == 0 && h.hub.flights.len() == 0
	})
}

func compactJSON(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, []byte(s)))
	return b.Bytes()
}
