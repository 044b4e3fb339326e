package mux

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A requestState is bound to its request's method and arguments: a retry
// with other arguments, or another method, is refused and leaves the
// request parked; the same arguments, written otherwise, resume it.
func TestRequestStateBoundToItsRequest(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connect()
	caps := `{"elicitation":{}}`
	c.send(modern(`"call"`, "tools/call", `{"name":"elicit","arguments":{"path":"/a","n":1}}`, "M", caps))
	m := c.recv()
	require.Equal(t, `"call"`, string(m.ID), "%s", m.Frame)
	var ir struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &ir))
	require.Len(t, ir.InputRequests, 1, "%s", m.Result)
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	input := `"inputResponses":{"` + key + `":{"action":"accept","content":{"n":"M"}}},"requestState":"` + ir.RequestState + `"`
	before := len(h.srv.messages("tools/call"))
	for _, tt := range []struct{ name, method, params string }{
		{"other arguments", "tools/call", `{"name":"elicit","arguments":{"path":"/etc","n":1},` + input + `}`},
		{"an argument more", "tools/call", `{"name":"elicit","arguments":{"path":"/a","n":1,"force":true},` + input + `}`},
		{"another tool", "tools/call", `{"name":"echo","arguments":{"path":"/a","n":1},` + input + `}`},
		{"another method", "prompts/get", `{"name":"elicit","arguments":{"path":"/a","n":1},` + input + `}`},
	} {
		c.send(modern(`"`+tt.name+`"`, tt.method, tt.params, "M", caps))
		code, reason := errorOf(t, c.recv())
		assert.Equal(t, []any{-32602, "invalid_request_state"}, []any{code, reason}, tt.name)
	}
	assert.Equal(t, before, len(h.srv.messages("tools/call")), "nothing refused reaches the server")
	assert.Empty(t, h.srv.messages("prompts/get"))

	// The same arguments, in another order and spacing, with another
	// envelope: resumed, and answered with the input.
	c.send(modern(`"retry"`, "tools/call", `{ "arguments": {"n":1, "path":"/a"}, "name":"elicit",`+input+`}`, "M2", caps))
	m = c.recv()
	require.Equal(t, `"retry"`, string(m.ID), "%s", m.Frame)
	assert.JSONEq(t, `{"answer":{"action":"accept","content":{"n":"M"}},"resultType":"complete"}`, string(m.Result))
}

func TestBindOf(t *testing.T) {
	base := bindOf("tools/call", json.RawMessage(`{"name":"x","arguments":{"a":[1,{"b":"c"}],"big":18446744073709551617}}`))
	same := []string{
		`{"arguments":{"big":18446744073709551617,"a":[1,{"b":"c"}]},"name":"x"}`,
		`{"name":"x","arguments":{"a":[1,{"b":"c"}],"big":18446744073709551617},"_meta":{"progressToken":7},"requestState":"s","inputResponses":{"k":{}}}`,
	}
	for _, p := range same {
		assert.Equal(t, base, bindOf("tools/call", json.RawMessage(p)), p)
	}
	other := []string{
		`{"name":"x","arguments":{"a":[1,{"b":"c"}],"big":18446744073709551616}}`, // beyond float64: still told apart
		`{"name":"x","arguments":{"a":[{"b":"c"},1],"big":18446744073709551617}}`,
		`{"name":"x","arguments":{"a":[1,{"b":"c"}],"big":18446744073709551617},"extra":null}`,
		`{"name":"y","arguments":{"a":[1,{"b":"c"}],"big":18446744073709551617}}`,
	}
	for _, p := range other {
		assert.NotEqual(t, base, bindOf("tools/call", json.RawMessage(p)), p)
	}
	assert.NotEqual(t, base, bindOf("prompts/get", json.RawMessage(same[0])), "the method binds too")
}
