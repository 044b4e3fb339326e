package jsonrpc_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestResponseID: the id of a line shaped like an answer is found whatever
// is wrong with the rest of it; lines of any other shape have none.
func TestResponseID(t *testing.T) {
	tests := []struct {
		name, frame string
		want        json.RawMessage // nil: none
	}{
		{"NaN in a result", `{"jsonrpc":"2.0","id":7,"result":{"x":NaN}}`, json.RawMessage(`7`)},
		{"Latin-1 in a string", "{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"text\":\"caf\xe9\"}}", json.RawMessage(`8`)},
		{"id after the result", `{"jsonrpc":"2.0","result":{"v":Infinity},"id":"s-1"}`, json.RawMessage(`"s-1"`)},
		{"an error answer", `{"jsonrpc":"2.0","id":9,"error":{"code":-1,"message":"x","data":NaN}}`, json.RawMessage(`9`)},
		{"escaped member names", `{"jsonrpc":"2.0","\u0069d":10,"\u0072esult":NaN}`, json.RawMessage(`10`)},
		{"a nested id only", `{"jsonrpc":"2.0","result":{"id":11,"x":NaN}}`, nil},
		{"a request", `{"jsonrpc":"2.0","id":12,"method":"sampling/createMessage","params":{"x":NaN}}`, nil},
		{"an escaped method", `{"jsonrpc":"2.0","id":13,"\u006d\u0065\u0074\u0068\u006f\u0064":"x","result":1}`, nil},
		{"no result or error", `{"jsonrpc":"2.0","id":14,"x":NaN}`, nil},
		{"two ids", `{"id":15,"id":16,"result":NaN}`, nil},
		{"an id MCP does not allow", `{"id":1.5,"result":NaN}`, nil},
		{"not an object", `[{"id":17,"result":NaN}]`, nil},
		{"plain junk", `Traceback (most recent call last):`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, jsonrpc.ResponseID([]byte(tt.frame)), "ResponseID(%q)", tt.frame)
		})
	}
}
