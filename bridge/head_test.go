package bridge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestFrameScan: the scan finds what jsonrpc.Parse finds of a frame's
// kind, id and method, fed whole or cut anywhere in two or in bytes, and
// gives up on what it does not read plainly.
func TestFrameScan(t *testing.T) {
	frames := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,{"b":"}\"]"}]}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		` { "method" : "ping" , "id" : "a b" , "jsonrpc" : "2.0" } `,
		`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"a\\\"b\\\\"}]},"id":-42}`,
		`{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"m","data":{"reason":"too_many_sessions"}}}`,
		`{"result":[true,false,null,1.5e3,"]"],"jsonrpc":"2.0","id":7}`,
	}
	for _, f := range frames {
		m, err := jsonrpc.Parse([]byte(f))
		require.NoError(t, err, f)
		for cut := 0; cut <= len(f); cut++ {
			for _, step := range []int{len(f), 1} {
				var s frameScan
				s.feed([]byte(f[:cut]))
				for i := cut; i < len(f); i += step {
					s.feed([]byte(f[i:min(i+step, len(f))]))
				}
				require.False(t, s.odd || s.batch, "%s", f)
				assert.Equal(t, string(m.ID), string(s.idOf()), "%s cut at %d", f, cut)
				if m.Method != "" {
					assert.True(t, s.methodIs(m.Method), "%s cut at %d", f, cut)
				}
				outcome := m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError
				assert.Equal(t, outcome, s.outcome, "%s cut at %d", f, cut)
				assert.Equal(t, m.Kind == jsonrpc.KindError, s.isError, "%s cut at %d", f, cut)
			}
		}
	}
	for _, f := range []string{
		`{"jsonrpc":"2.0","\u0069d":1,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,
		`{"jsonrpc":"2.0","id":"\u0031","method":"x"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`,
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("a", maxHeadValue) + `","method":"x"}`,
		`"not an object"`,
	} {
		var s frameScan
		s.feed([]byte(f))
		assert.True(t, s.odd, "%s", f)
	}
	var s frameScan
	s.feed([]byte(` [{"jsonrpc":"2.0","id":1,"method":"x"}]`))
	assert.True(t, s.batch)
}
