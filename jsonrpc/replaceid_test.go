package jsonrpc_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestReplaceID: the id is replaced whatever its length and wherever it
// sits; a new id no longer than the old one is written in place (the
// answer shares the frame's memory), a longer one gets a copy.
func TestReplaceID(t *testing.T) {
	tests := []struct {
		frame, id, want string
		inPlace         bool
	}{
		{`{"jsonrpc":"2.0","id":1234,"result":{"x":"y"}}`, `7`, `{"jsonrpc":"2.0","id":7,"result":{"x":"y"}}`, true},
		{`{"jsonrpc":"2.0","id":1234,"result":{}}`, `"ab"`, `{"jsonrpc":"2.0","id":"ab","result":{}}`, true},
		{`{"jsonrpc":"2.0","id":12,"result":{}}`, `34`, `{"jsonrpc":"2.0","id":34,"result":{}}`, true},
		{`{"id":99,"jsonrpc":"2.0","result":{}}`, `1`, `{"id":1,"jsonrpc":"2.0","result":{}}`, true},
		{`{"jsonrpc":"2.0","result":{"a":[1,2]},"id":5678}`, `"é"`, `{"jsonrpc":"2.0","result":{"a":[1,2]},"id":"é"}`, true},
		{`{"jsonrpc":"2.0","id":5,"result":{}}`, `"a longer id"`, `{"jsonrpc":"2.0","id":"a longer id","result":{}}`, false},
		{`{"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"m"}}`, `123456`, `{"jsonrpc":"2.0","id":123456,"error":{"code":-1,"message":"m"}}`, false},
	}
	for _, tt := range tests {
		frame := []byte(tt.frame)
		m, err := jsonrpc.Parse(frame)
		require.NoError(t, err, tt.frame)
		got := m.ReplaceID([]byte(tt.id))
		require.Equal(t, tt.want, string(got), "%s with id %s", tt.frame, tt.id)
		shared := &got[len(got)-1] == &frame[len(frame)-1]
		require.Equal(t, tt.inPlace, shared, "%s with id %s: written in place", tt.frame, tt.id)
		_, err = jsonrpc.Parse(got)
		require.NoError(t, err, "the result parses")
	}
}
