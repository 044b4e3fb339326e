package mux

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestInvalidAnswerFailsItsRequest: a server answer that is not valid
// JSON-RPC (a NaN) but whose id is readable fails that request at once
// with invalid_answer, under the session's own id; the session and the
// server go on.
func TestInvalidAnswerFailsItsRequest(t *testing.T) {
	h := newHarness(t, nil)
	c := h.session("2025-06-18")
	c.send(`{"jsonrpc":"2.0","id":"mine","method":"tools/call","params":{"name":"nan"}}`)
	m := c.answer()
	assert.Equal(t, `"mine"`, string(m.ID))
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{jsonrpc.CodeInternalError, jsonrpc.ReasonInvalidAnswer}, []any{code, reason})
	assert.Contains(t, string(m.Error), "not valid JSON-RPC", "the message says why")
	assert.Equal(t, 0, h.hub.flights.len(), "the request left the table")

	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, jsonrpc.KindResult, c.answer().Kind, "the session goes on")
}
