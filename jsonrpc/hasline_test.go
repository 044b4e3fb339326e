package jsonrpc_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// errWouldBlock is what chunkSource returns once it has nothing left: a
// real connection would block there.
var errWouldBlock = errors.New("test: the source was read again; a real connection would block here")

// chunkSource hands out its chunks one per Read, the way a socket hands out
// what each write put in it, and counts the Reads. Once it is out of chunks
// it returns errWouldBlock instead of blocking, so a test sees every Read
// that would have waited for input.
type chunkSource struct {
	chunks []string
	reads  int
}

func (s *chunkSource) Read(p []byte) (int, error) {
	s.reads++
	if len(s.chunks) == 0 {
		return 0, errWouldBlock
	}
	n := copy(p, s.chunks[0])
	if s.chunks[0] = s.chunks[0][n:]; s.chunks[0] == "" {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

// TestReaderHasLine checks HasLine against what is left in the buffer after
// a first frame was read: true exactly when a whole non-blank line is
// there, and then the next Read returns it without reading the source.
func TestReaderHasLine(t *testing.T) {
	const first = `{"first":1}`
	tests := []struct {
		name string
		rest string // what follows the first line, in the same chunk
		want bool
		// next is the frame the Read after HasLine returns; "" with a
		// *TooLargeError instead
		next     string
		tooLarge bool
	}{
		{"nothing after the first line", "", false, "", false},
		{"a partial line", `{"b":`, false, "", false},
		{"a line without its newline", `{"b":2}`, false, "", false},
		{"a CR without the LF", `{"b":2}` + "\r", false, "", false},
		{"a whole line", `{"b":2}` + "\n", true, `{"b":2}`, false},
		{"a whole line ending CRLF", `{"b":2}` + "\r\n", true, `{"b":2}`, false},
		{"a whole line and a partial one", `{"b":2}` + "\n" + `{"c"`, true, `{"b":2}`, false},
		{"an empty line", "\n", false, "", false},
		{"a blank line of spaces and CR", "  \r\n", false, "", false},
		{"a blank line of tabs", "\t \t\n", false, "", false},
		{"a blank line and a partial one", " \r\n" + `{"c"`, false, "", false},
		{"a whole line over the limit", obj(40) + "\n", true, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &chunkSource{chunks: []string{first + "\n" + tt.rest}}
			r := jsonrpc.NewReader(src, 32)

			assert.False(t, r.HasLine(), "HasLine before any Read: nothing is buffered")
			assert.Equal(t, 0, src.reads, "HasLine must not read the source")

			f, err := r.Read()
			require.NoError(t, err, "the first Read")
			require.Equal(t, first, string(f))
			require.Equal(t, 1, src.reads, "the first Read takes the whole chunk")

			assert.Equal(t, tt.want, r.HasLine(), "HasLine with %q buffered", tt.rest)
			assert.Equal(t, tt.want, r.HasLine(), "HasLine again: asking changes nothing")
			assert.Equal(t, 1, src.reads, "HasLine must not read the source")

			f, err = r.Read()
			if !tt.want {
				// Everything buffered is partial or blank: this Read
				// needed input, so a HasLine of true would have been a lie.
				assert.ErrorIs(t, err, errWouldBlock, "Read with %q buffered", tt.rest)
				return
			}
			assert.Equal(t, 1, src.reads, "a Read after HasLine reported true must not read the source")
			if tt.tooLarge {
				var tl *jsonrpc.TooLargeError
				assert.ErrorAs(t, err, &tl, "the buffered line is over the limit")
				assert.Nil(t, f)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.next, string(f))
		})
	}
}

// TestReaderHasLineAcrossReads follows HasLine through a stream whose
// lines arrive in pieces: false while only blank or partial input is
// buffered, true again once a whole line is.
func TestReaderHasLineAcrossReads(t *testing.T) {
	src := &chunkSource{chunks: []string{
		`{"a":1}` + "\n" + "  \r\n",
		"\t\n" + `{"b":2}` + "\n" + `{"c":3}` + "\n" + `{"d"`,
		`:4}` + "\n",
	}}
	r := jsonrpc.NewReader(src, 1<<10)
	type state struct {
		Frame   string
		HasLine bool
		Reads   int // Reads of the source so far
	}
	var got []state
	for range 4 {
		f, err := r.Read()
		require.NoError(t, err, "after %v", got)
		got = append(got, state{string(f), r.HasLine(), src.reads})
	}
	assert.Equal(t, []state{
		{`{"a":1}`, false, 1}, // only a blank line is left
		{`{"b":2}`, true, 2},  // the blank lines were skipped; c is whole
		{`{"c":3}`, false, 2}, // read from the buffer; d is partial
		{`{"d":4}`, false, 3},
	}, got)
	_, err := r.Read()
	assert.ErrorIs(t, err, errWouldBlock, "the source is exhausted")
}

// TestReaderHasLineLongLine: a line longer than the Reader's buffer is
// never whole in it, so HasLine stays false until it is read.
func TestReaderHasLineLongLine(t *testing.T) {
	long := obj(3 * bufSize)
	src := &chunkSource{chunks: []string{"{}\n" + long[:bufSize], long[bufSize:] + "\n{}\n"}}
	r := jsonrpc.NewReader(src, 1<<20)
	f, err := r.Read()
	require.NoError(t, err)
	require.Equal(t, "{}", string(f))
	assert.False(t, r.HasLine(), "only the start of a long line is buffered")
	f, err = r.Read()
	require.NoError(t, err)
	assert.Equal(t, long, string(f))
	assert.True(t, r.HasLine(), "the short line after the long one is whole")
	reads := src.reads
	f, err = r.Read()
	require.NoError(t, err)
	assert.Equal(t, "{}", string(f))
	assert.Equal(t, reads, src.reads, "a Read after HasLine reported true must not read the source")
	assert.False(t, r.HasLine(), "nothing left")
}
