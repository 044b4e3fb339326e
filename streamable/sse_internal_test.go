package streamable

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writes records each Write it is given.
type writes struct{ got [][]byte }

func (w *writes) Write(p []byte) (int, error) {
	w.got = append(w.got, bytes.Clone(p))
	return len(p), nil
}

// sseEncoding is the SSE encoding of an event, built the plain way.
func sseEncoding(id, data string) string {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: message\n")
	for line := range strings.Lines(data) {
		b.WriteString("data: " + strings.TrimRight(line, "\r\n") + "\n")
	}
	return b.String() + "\n"
}

// TestWriteSSE: an event is encoded alike whatever the length of its
// lines; one with no long line is one Write, and a long line is written as
// it is, in a Write of its own.
func TestWriteSSE(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", sseCopied) + `"}`
	for _, tc := range []struct {
		name, data string
		writes     int
	}{
		{"one line", `{"jsonrpc":"2.0","id":1,"result":{}}`, 1},
		{"line ends", "{\"a\":1}\r\n", 1},
		{"lines", "a\nb\r\nc", 1},
		{"long line", long, 3},
		{"long line, newline", long + "\n", 3},
		{"lines around a long one", "a\n" + long + "\nb\n" + long, 5},
	} {
		for _, id := range []string{"", "3-7"} {
			var w writes
			require.NoError(t, writeSSE(&w, id, []byte(tc.data)))
			// Compared as booleans: a failure would print 32 KiB lines.
			assert.True(t, sseEncoding(id, tc.data) == string(bytes.Join(w.got, nil)), "%s, id %q: the encoding", tc.name, id)
			if assert.Equal(t, tc.writes, len(w.got), "%s, id %q: writes", tc.name, id) && tc.writes > 1 {
				assert.True(t, long == string(w.got[1]), "%s, id %q: the long line in a Write of its own", tc.name, id)
			}
		}
	}
}

// TestWriteSSELargeNoCopy: a 10 MB event is written without a copy of its
// data (it was copied into a fresh buffer of its size, which the daemon
// paid for in allocation, page faults and collections).
func TestWriteSSELargeNoCopy(t *testing.T) {
	data := []byte(`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 10<<20) + `"}`)
	require.NoError(t, writeSSE(io.Discard, "1-1", data))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	require.NoError(t, writeSSE(io.Discard, "1-2", data))
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(256<<10), "bytes allocated writing a %d-byte event", len(data))
}
