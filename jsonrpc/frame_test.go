package jsonrpc_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// bufSize is the Reader's internal buffer; lines longer than it are read
// in pieces, which is where framing bugs hide.
const bufSize = 512

// maxCapturedID is how many bytes of an oversized frame's id the Reader keeps.
const maxCapturedID = 1 << 10

// step is one outcome of Reader.Read.
type step struct {
	Frame    string
	TooLarge *jsonrpc.TooLargeError
	Err      error
}

func frame(s string) step { return step{Frame: s} }

func tooLarge(size, limit int, id string) step {
	e := &jsonrpc.TooLargeError{Size: int64(size), Limit: limit}
	if id != "" {
		e.ID = raw(id)
	}
	return step{TooLarge: e}
}

var eof = step{Err: io.EOF}

// readAll reads until an error other than *TooLargeError.
func readAll(t testing.TB, r *jsonrpc.Reader) []step {
	t.Helper()
	var steps []step
	for range 1 << 20 {
		f, err := r.Read()
		var tl *jsonrpc.TooLargeError
		switch {
		case err == nil:
			steps = append(steps, frame(string(f)))
		case errors.As(err, &tl):
			require.Nil(t, f, "a frame with a *TooLargeError")
			steps = append(steps, step{TooLarge: tl})
		default:
			require.Nil(t, f, "a frame with %v", err)
			return append(steps, step{Err: err})
		}
	}
	t.Fatal("the reader never ended")
	return nil
}

// chunkings feed the same bytes to the Reader in different pieces; the
// frames must not depend on them.
func chunkings() []struct {
	name string
	wrap func(io.Reader) io.Reader
} {
	return []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one-byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"data+EOF", iotest.DataErrReader},
	}
}

// obj returns a JSON object of exactly n bytes (n >= 8).
func obj(n int) string {
	return `{"s":"` + strings.Repeat("x", n-8) + `"}`
}

type readerCase struct {
	name  string
	in    string
	limit int
	want  []step
}

func readerCases() []readerCase {
	cases := []readerCase{
		{"one frame", `{"a":1}` + "\n", 100, []step{frame(`{"a":1}`), eof}},
		{"empty input", "", 100, []step{eof}},
		{"only blank lines", "\n\r\n \t \n\r\n", 100, []step{eof}},
		{"blank lines skipped", "\n\r\n  \t\n{}\n \n\n[1]\n\r\n", 100, []step{frame("{}"), frame("[1]"), eof}},
		{"CRLF", "{\"a\":1}\r\n{\"b\":2}\r\n", 100, []step{frame(`{"a":1}`), frame(`{"b":2}`), eof}},
		{"mixed endings", "{}\r\n[]\n\"x\"\r\n", 100, []step{frame("{}"), frame("[]"), frame(`"x"`), eof}},
		{"last line without newline", "{}\n{\"x\":1}", 100, []step{frame("{}"), frame(`{"x":1}`), eof}},
		{"only a line without newline", `{"x":1}`, 100, []step{frame(`{"x":1}`), eof}},
		{"bare CR at the end of the stream", "{}\r", 100, []step{frame("{}"), eof}},
		{"CR inside a line kept", "a\rb\n", 100, []step{frame("a\rb"), eof}},
		{"second CR kept", "{}\r\r\n", 100, []step{frame("{}\r"), eof}},
		{"lines are not trimmed", "  {} \t\n", 100, []step{frame("  {} \t"), eof}},
		{
			// Only JSON whitespace makes a line blank; anything else is a
			// frame, so that the client hears -32700 about it.
			"non-JSON whitespace is a frame", "\f\n\v\n\u00a0\n\u2028\n\u0085\n", 100,
			[]step{frame("\f"), frame("\v"), frame("\u00a0"), frame("\u2028"), frame("\u0085"), eof},
		},
		{"NUL is a frame", "\x00\n", 100, []step{frame("\x00"), eof}},

		{"exactly at the limit, LF", obj(100) + "\n", 100, []step{frame(obj(100)), eof}},
		{"exactly at the limit, CRLF", obj(100) + "\r\n", 100, []step{frame(obj(100)), eof}},
		{"exactly at the limit, EOF", obj(100), 100, []step{frame(obj(100)), eof}},
		{"limit+1, LF", obj(101) + "\n", 100, []step{tooLarge(101, 100, ""), eof}},
		{"limit+1, CRLF", obj(101) + "\r\n", 100, []step{tooLarge(101, 100, ""), eof}},
		{"limit+1, EOF", obj(101), 100, []step{tooLarge(101, 100, ""), eof}},
		{"limit+2, LF", obj(102) + "\n", 100, []step{tooLarge(102, 100, ""), eof}},
		{"limit+2, EOF", obj(102), 100, []step{tooLarge(102, 100, ""), eof}},
		{"limit+1 by a kept CR, LF", obj(100) + "\r\r\n", 100, []step{tooLarge(101, 100, ""), eof}},
		{"limit+1 by a kept CR, EOF", obj(100) + "\r\r", 100, []step{tooLarge(101, 100, ""), eof}},
		{"far over, CR at EOF", obj(300) + "\r", 100, []step{tooLarge(300, 100, ""), eof}},
		{"far over, CRLF", obj(300) + "\r\n", 100, []step{tooLarge(300, 100, ""), eof}},
		{"at a limit past the buffer", obj(10000) + "\r\n", 10000, []step{frame(obj(10000)), eof}},
		{"limit+1 past the buffer", obj(10001) + "\n", 10000, []step{tooLarge(10001, 10000, ""), eof}},
		{"limit+2 past the buffer, CRLF", obj(10002) + "\r\n", 10000, []step{tooLarge(10002, 10000, ""), eof}},
		{"limit equal to the buffer", obj(bufSize) + "\n", bufSize, []step{frame(obj(bufSize)), eof}},
		{"limit equal to the buffer, over", obj(bufSize+1) + "\r\n", bufSize, []step{tooLarge(bufSize+1, bufSize, ""), eof}},
		{
			"next frame after an oversized one",
			obj(500) + "\n" + `{"a":1}` + "\n", 100,
			[]step{tooLarge(500, 100, ""), frame(`{"a":1}`), eof},
		},
		{
			"oversized frames in a row, blank lines between",
			obj(5000) + "\r\n\n" + obj(200) + "\n\n" + obj(50) + "\n" + obj(300), 100,
			[]step{tooLarge(5000, 100, ""), tooLarge(200, 100, ""), frame(obj(50)), tooLarge(300, 100, ""), eof},
		},
		{"an oversized blank line is still oversized", strings.Repeat(" ", 300) + "\n{}\n", 100, []step{tooLarge(300, 100, ""), frame("{}"), eof}},
		{"limit zero", "{}\n\n", 0, []step{tooLarge(2, 0, ""), eof}},
		{"no limit (math.MaxInt)", "{}\n" + obj(20000) + "\n", math.MaxInt, []step{frame("{}"), frame(obj(20000)), eof}},
	}
	// Lines that end on, just before and just after the buffer's edge, with
	// LF and CRLF (so that the CR and the LF can land in different reads).
	for _, n := range []int{bufSize - 2, bufSize - 1, bufSize, bufSize + 1, bufSize + 2, 2*bufSize - 1, 2 * bufSize, 2*bufSize + 1, 10000} {
		for _, eol := range []string{"\n", "\r\n"} {
			cases = append(cases, readerCase{
				fmt.Sprintf("line of %d bytes, %q", n, eol),
				obj(n) + eol + obj(20) + eol, 1 << 20,
				[]step{frame(obj(n)), frame(obj(20)), eof},
			})
		}
	}
	return cases
}

func TestReader(t *testing.T) {
	for _, c := range readerCases() {
		for _, ch := range chunkings() {
			t.Run(c.name+"/"+ch.name, func(t *testing.T) {
				r := jsonrpc.NewReader(ch.wrap(strings.NewReader(c.in)), c.limit)
				assert.Equal(t, c.want, readAll(t, r), "input %.80q (%d bytes), limit %d", c.in, len(c.in), c.limit)
			})
		}
	}
}

// pad is long enough to push an oversized frame past several buffers.
var pad = strings.Repeat("p", 3*bufSize+17)

func TestReaderTooLargeID(t *testing.T) {
	const limit = 64
	cases := []struct {
		name string
		line string
		id   string // "" for none
	}{
		{"id first", `{"id":7,"jsonrpc":"2.0","method":"m","params":{"s":"` + pad + `"}}`, `7`},
		{"id last", `{"jsonrpc":"2.0","method":"m","params":{"s":"` + pad + `"},"id":"abc"}`, `"abc"`},
		{"id in the middle", `{"jsonrpc":"2.0","params":{"s":"` + pad + `"},"id":-12,"method":"m","x":"` + pad + `"}`, `-12`},
		{"id after a long key", `{"` + pad + `":1,"id":3}`, `3`},
		{"whitespace around the id", "{ \"id\" :\t 5 \r, \"s\":\"" + pad + "\"}", `5`},
		{"id just before the closing brace", `{"s":"` + pad + `","id": 5 }`, `5`},
		{"leading whitespace", " \t {\"id\":1,\"s\":\"" + pad + "\"}", `1`},
		{"string id with escapes and brackets", `{"id":"a\"},[b\\","s":"` + pad + `"}`, `"a\"},[b\\"`},
		{"unicode string id", `{"id":"日本\u00e9","s":"` + pad + `"}`, `"日本\u00e9"`},
		{"big integer id", `{"id":123456789012345678901234567890,"s":"` + pad + `"}`, `123456789012345678901234567890`},
		{"zero id", `{"s":"` + pad + `","id":0}`, `0`},
		{"empty string id", `{"s":"` + pad + `","id":""}`, `""`},
		{"id of exactly 1 KiB", `{"id":"` + strings.Repeat("i", maxCapturedID-2) + `","s":"` + pad + `"}`, `"` + strings.Repeat("i", maxCapturedID-2) + `"`},
		{"id over 1 KiB", `{"id":"` + strings.Repeat("i", maxCapturedID-1) + `","s":"` + pad + `"}`, ""},
		{"escaped spelling of id", `{"\u0069d":8,"s":"` + pad + `"}`, `8`},
		{"fully escaped spelling of id", `{"\u0069\u0064":8,"s":"` + pad + `"}`, `8`},
		{"escaped key that is not id", `{"\u0069e":8,"s":"` + pad + `"}`, ""},

		{"nested id in params", `{"jsonrpc":"2.0","method":"m","params":{"id":1,"s":"` + pad + `"}}`, ""},
		{"nested id in result", `{"jsonrpc":"2.0","result":{"content":[{"id":1}],"s":"` + pad + `"}}`, ""},
		{"nested id in an array", `{"x":[{"id":1},["id",{"id":2}]],"s":"` + pad + `"}`, ""},
		{"nested ids and a top-level one", `{"params":{"id":1},"id":2,"result":[{"id":3}],"s":"` + pad + `"}`, `2`},
		{"string value containing \"id\":", `{"method":"m","params":{"s":"\"id\":3,` + pad + `"}}`, ""},
		{"top-level string value containing \"id\":", `{"note":"\",\"id\":3,","s":"` + pad + `"}`, ""},
		{"value ending in an escaped backslash", `{"note":"x\\","id":4,"s":"` + pad + `"}`, `4`},
		{"key containing id", `{"xid":1,"idx":2,"i":3,"s":"` + pad + `"}`, ""},
		{"miscased ID", `{"ID":1,"Id":2,"s":"` + pad + `"}`, ""},
		{"miscased ID beside id", `{"ID":1,"id":2,"s":"` + pad + `"}`, `2`},

		{"two ids", `{"id":1,"s":"` + pad + `","id":2}`, ""},
		{"two equal ids", `{"id":1,"id":1,"s":"` + pad + `"}`, ""},
		{"id and its escaped spelling", `{"id":1,"\u0069d":2,"s":"` + pad + `"}`, ""},
		{"id object", `{"id":{"a":1},"s":"` + pad + `"}`, ""},
		{"id array", `{"id":[1],"s":"` + pad + `"}`, ""},
		{"id null", `{"id":null,"s":"` + pad + `"}`, ""},
		{"id true", `{"id":true,"s":"` + pad + `"}`, ""},
		{"id float", `{"id":1.5,"s":"` + pad + `"}`, ""},
		{"id exponent", `{"id":1e3,"s":"` + pad + `"}`, ""},
		{"id leading zero", `{"id":01,"s":"` + pad + `"}`, ""},
		{"id bare word", `{"id":abc,"s":"` + pad + `"}`, ""},
		{"id missing its value", `{"id":,"s":"` + pad + `"}`, ""},

		{"array", `[{"id":1},"` + pad + `"]`, ""},
		{"string", `"` + pad + `"`, ""},
		{"number", strings.Repeat("1", 5000), ""},
		{"garbage", `x{"id":1,"s":"` + pad + `"}`, ""},
		{"truncated after the id", `{"id":9,"s":"` + pad, `9`},
		{"truncated inside the id", `{"s":"` + pad + `","id":12`, ""},
		{"deeply nested", `{"id":3,"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`, `3`},
		{"unbalanced brackets", `{"x":]]]` + pad + `,"id":1}`, ""},
	}
	for _, c := range cases {
		for _, eol := range []string{"\n", "\r\n", ""} {
			for _, ch := range chunkings() {
				t.Run(fmt.Sprintf("%s/%q/%s", c.name, eol, ch.name), func(t *testing.T) {
					in, want := c.line+eol+"{}\n", []step{tooLarge(len(c.line), limit, c.id), frame("{}"), eof}
					if eol == "" { // the line ends the stream
						in, want = c.line, []step{tooLarge(len(c.line), limit, c.id), eof}
					}
					r := jsonrpc.NewReader(ch.wrap(strings.NewReader(in)), limit)
					assert.Equal(t, want, readAll(t, r), "line %.120q", c.line)
				})
			}
		}
	}
}

// TestReaderIDAcrossBuffers puts the id member at every offset around the
// buffer's edge, so that its name, its colon and its value are each split
// between two reads.
func TestReaderIDAcrossBuffers(t *testing.T) {
	for off := bufSize - 24; off <= bufSize+8; off++ {
		prefix := `{"p":"` + strings.Repeat("x", off-len(`{"p":"",`)) + `",`
		require.Len(t, prefix, off)
		line := prefix + `"id":"abc\"def","q":"` + pad + `"}`
		for _, ch := range chunkings() {
			t.Run(fmt.Sprintf("%d/%s", off, ch.name), func(t *testing.T) {
				r := jsonrpc.NewReader(ch.wrap(strings.NewReader(line+"\r\n")), bufSize)
				want := []step{tooLarge(len(line), bufSize, `"abc\"def"`), eof}
				assert.Equal(t, want, readAll(t, r), "id at offset %d", off)
			})
		}
	}
}

// repeatReader yields n copies of b without holding them.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = r.b
	}
	r.n -= int64(len(p))
	return len(p), nil
}

// TestReaderOversizedMemory skips a 64 MiB line under a 1 MiB limit and
// checks that the Reader never held anything near the line in memory.
func TestReaderOversizedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 64 MiB")
	}
	const (
		limit = 1 << 20
		body  = 64 << 20
	)
	head := `{"jsonrpc":"2.0","method":"tools/call","id":42,"params":{"data":"`
	tail := `"}}` + "\r\n"
	src := io.MultiReader(strings.NewReader(head), &repeatReader{'a', body}, strings.NewReader(tail+`{"id":43}`+"\n"))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := jsonrpc.NewReader(src, limit)
	_, err := r.Read()
	runtime.ReadMemStats(&after)

	var tl *jsonrpc.TooLargeError
	require.ErrorAs(t, err, &tl)
	want := &jsonrpc.TooLargeError{Size: int64(len(head) + body + len(tail) - 2), Limit: limit, ID: raw("42")}
	assert.Equal(t, want, tl, "a %d-byte line", want.Size)
	alloc := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, alloc, uint64(8<<20), "bytes allocated while skipping a %d MiB line", body>>20)
	t.Logf("allocated %d KiB while skipping %d MiB", alloc>>10, body>>20)

	assert.Equal(t, []step{frame(`{"id":43}`), eof}, readAll(t, r), "the frames after the oversized one")
}

// TestReaderOwnsFrames checks that a frame survives the reads after it.
func TestReaderOwnsFrames(t *testing.T) {
	in := obj(100) + "\n" + obj(bufSize*2) + "\n" + strings.ReplaceAll(obj(100), "x", "y") + "\n"
	r := jsonrpc.NewReader(strings.NewReader(in), 1<<20)
	var got []string
	var frames [][]byte
	for {
		f, err := r.Read()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		frames = append(frames, f)
	}
	for _, f := range frames {
		got = append(got, string(f))
	}
	assert.Equal(t, []string{obj(100), obj(bufSize * 2), strings.ReplaceAll(obj(100), "x", "y")}, got, "frames after reading them all")
}

func TestReaderIOError(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		src  io.Reader
		want []step
	}{
		{"error after a frame", io.MultiReader(strings.NewReader("{}\n"), iotest.ErrReader(boom)), []step{frame("{}"), {Err: boom}}},
		{"error inside a line", io.MultiReader(strings.NewReader("{}\n{\"partial\""), iotest.ErrReader(boom)), []step{frame("{}"), {Err: boom}}},
		{"error while skipping", io.MultiReader(strings.NewReader(obj(10000)), iotest.ErrReader(boom)), []step{{Err: boom}}},
		{"unexpected EOF is an ending", iotest.ErrReader(io.ErrUnexpectedEOF), []step{{Err: io.ErrUnexpectedEOF}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, readAll(t, jsonrpc.NewReader(c.src, 100)), c.name)
		})
	}
}

func TestTooLargeError(t *testing.T) {
	err := error(&jsonrpc.TooLargeError{Size: 2000, Limit: 1024, ID: raw("1")})
	assert.Equal(t, "jsonrpc: message of 2000 bytes is over the limit of 1024", err.Error(), "Error()")
	var tl *jsonrpc.TooLargeError
	require.ErrorAs(t, fmt.Errorf("read client: %w", err), &tl)
	assert.Equal(t, raw("1"), tl.ID, "ID through a wrap")
}

// Reset moves a Reader to another source: what the first had buffered is
// dropped, the limit stays.
func TestReaderReset(t *testing.T) {
	r := jsonrpc.NewReader(strings.NewReader("{\"a\":1}\n{\"a\":2}\n"), 16)
	f, err := r.Read()
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(f))
	r.Reset(strings.NewReader("{\"b\":1}\n{\"b\":\"" + strings.Repeat("x", 32) + "\"}\n"))
	f, err = r.Read()
	require.NoError(t, err)
	assert.Equal(t, `{"b":1}`, string(f), "the new source, not what the old one had buffered")
	_, err = r.Read()
	var tooLarge *jsonrpc.TooLargeError
	require.ErrorAs(t, err, &tooLarge, "the limit holds after Reset")
	assert.Equal(t, 16, tooLarge.Limit)
	_, err = r.Read()
	assert.ErrorIs(t, err, io.EOF)
}
