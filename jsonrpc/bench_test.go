package jsonrpc_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// prose returns about n bytes of text with the quotes, backslashes,
// newlines and non-ASCII that real tool output carries, as a JSON string.
func prose(n int) string {
	const line = "func main() {\n\tfmt.Println(\"héllo, wörld\") // C:\\tmp\\x\n}\n"
	text := strings.Repeat(line, n/len(line)+1)[:n]
	b, err := json.Marshal(text)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// callRequest is a tools/call whose arguments carry n bytes of text, with a
// progress token, as a client sends it.
func callRequest(n int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":"req-0001","method":"tools/call","params":{"name":"write_file",` +
		`"arguments":{"path":"/tmp/main.go","content":` + prose(n) + `},"_meta":{"progressToken":"client-token-1"}}}`)
}

// callResult is a tools/call result whose text content is n bytes, as a
// server sends it.
func callResult(n int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":41,"result":{"content":[{"type":"text","text":` + prose(n) +
		`}],"structuredContent":null,"isError":false}}`)
}

func BenchmarkParseRewrite1KB(b *testing.B)  { benchParseRewrite(b, 1<<10) }
func BenchmarkParseRewrite10MB(b *testing.B) { benchParseRewrite(b, 10<<20) }

// benchParseRewrite measures the data path's work on one message each way:
// a request gets a fresh upstream id and a mux progress token; a result
// gets its client's id back. "reencode" is the alternative the design left
// to this benchmark: decode the envelope with encoding/json and encode it again.
func benchParseRewrite(b *testing.B, n int) {
	req, res := callRequest(n), callResult(n)
	upstreamID, muxToken, clientID := []byte("1234567"), []byte("89012"), []byte(`"req-0001"`)

	b.Run("request", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		b.ReportAllocs()
		for b.Loop() {
			m, err := jsonrpc.Parse(req)
			if err != nil {
				b.Fatal(err)
			}
			id, _ := m.IDSpan()
			tok, ok := m.ParamsPath("_meta", "progressToken")
			if !ok {
				b.Fatal("no progress token")
			}
			out := jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: id, Value: upstreamID}, jsonrpc.Edit{Span: tok, Value: muxToken})
			if len(out) == 0 {
				b.Fatal("empty splice")
			}
		}
	})
	b.Run("response", func(b *testing.B) {
		b.SetBytes(int64(len(res)))
		b.ReportAllocs()
		for b.Loop() {
			m, err := jsonrpc.Parse(res)
			if err != nil {
				b.Fatal(err)
			}
			if out := m.WithID(clientID); len(out) == 0 {
				b.Fatal("empty splice")
			}
		}
	})
	b.Run("reencode", func(b *testing.B) {
		b.SetBytes(int64(len(res)))
		b.ReportAllocs()
		for b.Loop() {
			var env map[string]json.RawMessage
			if err := json.Unmarshal(res, &env); err != nil {
				b.Fatal(err)
			}
			env["id"] = clientID
			if _, err := json.Marshal(env); err != nil {
				b.Fatal(err)
			}
		}
	})

	// The rewrites the benchmark times are the right ones.
	m, err := jsonrpc.Parse(req)
	require.NoError(b, err)
	id, _ := m.IDSpan()
	tok, _ := m.ParamsPath("_meta", "progressToken")
	m2, err := jsonrpc.Parse(jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: tok, Value: muxToken}, jsonrpc.Edit{Span: id, Value: upstreamID}))
	require.NoError(b, err)
	require.Equal(b, raw("1234567"), m2.ID)
}

// loopReader repeats buf forever.
type loopReader struct {
	buf []byte
	off int
}

func (r *loopReader) Read(p []byte) (int, error) {
	n := copy(p, r.buf[r.off:])
	r.off = (r.off + n) % len(r.buf)
	return n, nil
}

// BenchmarkReader1KB frames a stream of 1 KB messages.
func BenchmarkReader1KB(b *testing.B) {
	line := append(callResult(1<<10-110), '\n')
	b.Logf("frame of %d bytes", len(line))
	r := jsonrpc.NewReader(&loopReader{buf: []byte(strings.Repeat(string(line), 64))}, 16<<20)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := r.Read()
		if err != nil || len(f) != len(line)-1 {
			b.Fatalf("read %d bytes: %v", len(f), err)
		}
	}
}

// BenchmarkReader10MB frames a stream of 10 MB messages through a server
// stdout's 256 KiB buffer: a line longer than the buffer is gathered from
// many reads.
func BenchmarkReader10MB(b *testing.B) {
	line := append(callResult(10<<20), '\n')
	r := jsonrpc.NewReaderSize(&loopReader{buf: line}, 16<<20, 256<<10)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := r.Read()
		if err != nil || len(f) != len(line)-1 {
			b.Fatalf("read %d bytes: %v", len(f), err)
		}
	}
}

// BenchmarkReaderTooLarge skips a stream of 2 MB messages over a 1 MB
// limit, as a server's stdout is read: the skipping scan looks at every
// byte for the id, which it must still find.
func BenchmarkReaderTooLarge(b *testing.B) {
	line := append(callResult(2<<20), '\n')
	r := jsonrpc.NewReaderSize(&loopReader{buf: line}, 1<<20, 256<<10)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		_, err := r.Read()
		var tl *jsonrpc.TooLargeError
		if !errors.As(err, &tl) || string(tl.ID) != "41" || tl.Size != int64(len(line)-1) {
			b.Fatalf("read: %v, want a TooLargeError for id 41 of %d bytes", err, len(line)-1)
		}
	}
}

// BenchmarkParseSmall parses the short messages that make up most of the
// traffic, where the envelope's checks weigh more than the validation of
// the payload.
func BenchmarkParseSmall(b *testing.B) {
	frames := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-1","progress":3,"total":10}}`),
		[]byte(`{"jsonrpc":"2.0","id":"a-17","result":{}}`),
		[]byte(`{"jsonrpc":"2.0","id":12,"error":{"code":-32601,"message":"Method not found"}}`),
	}
	var bytes int
	for _, f := range frames {
		bytes += len(f)
	}
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range frames {
			if _, err := jsonrpc.Parse(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}
