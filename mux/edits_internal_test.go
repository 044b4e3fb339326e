package mux

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// The edits that send a session's request on under its upstream id take
// one allocation, which holds them and the id they write, however many
// digits the id has.
func TestEditsTakeOneAllocation(t *testing.T) {
	c := &client{h: &Hub{}}
	jm, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo"}}`))
	require.NoError(t, err)
	m := viewOf(jm)
	edits := c.edits(&m, sameEra, 1234567, false, jsonrpc.Span{})
	require.Len(t, edits, 1)
	assert.Equal(t, "1234567", string(edits[0].Value))
	out := jsonrpc.Splice(jm.Frame, edits...)
	assert.Contains(t, string(out), `"id":1234567`)
	n := testing.AllocsPerRun(100, func() { _ = c.edits(&m, sameEra, 1234567, false, jsonrpc.Span{}) })
	assert.LessOrEqual(t, n, 1.0, "allocations per edits")
}
