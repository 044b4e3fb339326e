package jsonrpc_test

import (
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/stretchr/testify/require"
)

// TestSpliceLarge: a frame past the size where Splice switches to
// bytes.Join is rewritten exactly as a small one is: ids longer, shorter
// and of the same length, a progress token, and edits given out of order.
func TestSpliceLarge(t *testing.T) {
	for _, size := range []int{1 << 10, 64<<10 - 100, 64 << 10, 1 << 20} {
		text := strings.Repeat("x", size)
		frame := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"_meta":{"progressToken":"tok"},"text":"` + text + `"}}`)
		m, err := jsonrpc.Parse(frame)
		require.NoError(t, err)
		id, ok := m.IDSpan()
		require.True(t, ok)
		tok, ok := m.ParamsPath("_meta", "progressToken")
		require.True(t, ok)
		for _, newID := range []string{"7", "34", `"a much longer id than before"`} {
			want := `{"jsonrpc":"2.0","id":` + newID + `,"method":"tools/call","params":{"_meta":{"progressToken":99},"text":"` + text + `"}}`
			got := jsonrpc.Splice(frame, jsonrpc.Edit{Span: tok, Value: []byte("99")}, jsonrpc.Edit{Span: id, Value: []byte(newID)})
			require.Equal(t, want, string(got), "size %d, id %s", size, newID)
			require.Equal(t, len(want), cap(got), "size %d: exactly the bytes needed", size)
		}
	}
}
