package jsonrpc_test

import (
	"slices"
	"strconv"
	"strings"
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

// largeAnswer is an answer of more than 64 KiB, in a buffer with room past
// its end, as the server's reader puts a large one together.
func largeAnswer(id, room int) []byte {
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 100<<10) + `"}]}}`
	return append(make([]byte, 0, len(body)+room), body...)
}

// TestReplaceIDLongerInPlace: a longer id goes into a large answer in
// place when its buffer has the room, the rest moving along, and the
// message then describes the new frame; without the room it is a copy and
// the frame is left alone.
func TestReplaceIDLongerInPlace(t *testing.T) {
	id := []byte(`"request-0000000000000000-42"`)
	frame := largeAnswer(7, 64)
	want := strings.Replace(string(frame), `"id":7`, `"id":`+string(id), 1)
	m, err := jsonrpc.Parse(frame)
	require.NoError(t, err)
	result := string(m.Result)
	got := m.ReplaceID(id)
	require.Equal(t, want, string(got))
	require.Same(t, &frame[0], &got[0], "edited in its own buffer")
	require.Equal(t, string(id), string(m.ID))
	require.Equal(t, result, string(m.Result), "the result, where it moved to")
	require.Equal(t, got, m.Frame)
	s, ok := m.IDSpan()
	require.True(t, ok)
	require.Equal(t, string(id), string(got[s.Start:s.End]))
	require.Equal(t, jsonrpc.SpanOf(got, m.Result), jsonrpc.SpanOf(m.Frame, m.Result))
	require.Equal(t, result, string(got[jsonrpc.SpanOf(got, m.Result).Start:][:len(result)]))

	tight := largeAnswer(7, 0)
	before := string(tight)
	m, err = jsonrpc.Parse(tight)
	require.NoError(t, err)
	got = m.ReplaceID(id)
	require.Equal(t, want, string(got))
	require.NotSame(t, &tight[0], &got[0], "no room: a copy")
	require.Equal(t, before, string(tight), "the frame is left as it was")
}

// TestSpliceHead: edits at a large frame's start are made in place, the
// same as Splice makes them, growing or shrinking it, and the message's
// members follow; a small frame, or an edit past the head, gets a copy.
func TestSpliceHead(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value string // what the id becomes
	}{
		{"grows", `"a-much-longer-id"`},
		{"shrinks", `1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			frame := largeAnswer(123456, 64)
			m, err := jsonrpc.Parse(frame)
			require.NoError(t, err)
			idSpan, _ := m.IDSpan()
			rs := jsonrpc.SpanOf(m.Frame, m.Result)
			edits := func() []jsonrpc.Edit {
				return []jsonrpc.Edit{
					{Span: jsonrpc.Span{Start: rs.Start + 1, End: rs.Start + 1}, Value: []byte(`"resultType":"complete",`)},
					{Span: idSpan, Value: []byte(tt.value)},
				}
			}
			want := string(jsonrpc.Splice(slices.Clone(frame), edits()...))
			got := m.SpliceHead(edits()...)
			require.Equal(t, want, string(got))
			require.Same(t, &frame[0], &got[0], "edited in its own buffer")
			require.Equal(t, got, m.Frame)
			again, err := jsonrpc.Parse(slices.Clone(got))
			require.NoError(t, err)
			require.Equal(t, string(again.ID), string(m.ID))
			require.Equal(t, string(again.Result), string(m.Result))
			require.Equal(t, jsonrpc.SpanOf(again.Frame, again.Result), jsonrpc.SpanOf(m.Frame, m.Result))
		})
	}
	t.Run("same length", func(t *testing.T) {
		frame := largeAnswer(123456, 0)
		want := strings.Replace(string(frame), `"id":123456`, `"id":654321`, 1)
		m, err := jsonrpc.Parse(frame)
		require.NoError(t, err)
		s, _ := m.IDSpan()
		got := m.SpliceHead(jsonrpc.Edit{Span: s, Value: []byte(`654321`)})
		require.Equal(t, want, string(got))
		require.Same(t, &frame[0], &got[0], "no room needed")
		require.Equal(t, `654321`, string(m.ID))
	})
	t.Run("small", func(t *testing.T) {
		frame := append(make([]byte, 0, 128), `{"jsonrpc":"2.0","id":1,"result":{}}`...)
		m, err := jsonrpc.Parse(frame)
		require.NoError(t, err)
		s, _ := m.IDSpan()
		got := m.SpliceHead(jsonrpc.Edit{Span: s, Value: []byte(`"longer"`)})
		require.Equal(t, `{"jsonrpc":"2.0","id":"longer","result":{}}`, string(got))
		require.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, string(frame), "a copy")
	})
	t.Run("past the head", func(t *testing.T) {
		frame := largeAnswer(1, 64)
		before := string(frame)
		m, err := jsonrpc.Parse(frame)
		require.NoError(t, err)
		end := len(frame) - 2 // inside the result's content array's end
		got := m.SpliceHead(jsonrpc.Edit{Span: jsonrpc.Span{Start: end, End: end}, Value: []byte(` `)})
		require.Len(t, got, len(frame)+1)
		require.Equal(t, before, string(frame), "a copy")
	})
}
