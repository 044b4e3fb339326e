package jsonrpc_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// maxSeed keeps the table inputs that seed the fuzzers small: the fuzzer
// spends up to a minute minimizing each new input, and the long and deeply
// nested cases stay covered by the table tests.
const maxSeed = 1 << 10

// FuzzReader feeds random lines under a random limit, in random pieces, and
// compares the Reader with a model of the framing rules built from
// bytes.Split. Every frame is under the limit and has no newline; the id an
// oversized frame reports is a valid id, and for a well-formed frame it is
// the id Parse reads.
func FuzzReader(f *testing.F) {
	for _, c := range readerCases() {
		if len(c.in) <= maxSeed { // the pad argument makes the long lines
			f.Add([]byte(c.in), uint16(c.limit), uint16(0), uint8(0))
		}
	}
	f.Add([]byte(obj(100)+"\r\n"+obj(90)), uint16(bufSize), uint16(bufSize-100), uint8(1))
	f.Add([]byte(`{"id":1,"\u0069d":2,"s":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`+"\n{}"), uint16(16), uint16(bufSize-3), uint8(1))
	f.Add([]byte(`{"a":[{"id":1}],"id" : "x\"y" ,"b":"zzzzzzzzzzzzzzzzzzzzzzzz"}`+"\r\n"), uint16(20), uint16(bufSize-10), uint8(2))
	f.Add([]byte("0123456789\r\r"), uint16(10), uint16(0), uint8(3))
	f.Add([]byte(`{"ID":1,"id":2,"x":"yyyyyyyyyyyy"}`), uint16(5), uint16(7), uint8(0))

	f.Fuzz(func(t *testing.T, data []byte, limit, pad uint16, how uint8) {
		if len(data) > 64<<10 {
			t.Skip("long inputs make slow fuzzing and teach it nothing new")
		}
		lim := int(limit) % (3 * bufSize)
		input := append(bytes.Repeat([]byte(" "), int(pad)%(2*bufSize+1)), data...)
		ch := chunkings()[int(how)%len(chunkings())]
		got := readAll(t, jsonrpc.NewReader(ch.wrap(bytes.NewReader(input)), lim))

		var want []step
		var big [][]byte // the oversized lines, in order
		for rest := input; len(rest) > 0; {
			line := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			line = bytes.TrimSuffix(line, []byte("\r"))
			switch {
			case len(line) > lim:
				want = append(want, tooLarge(len(line), lim, ""))
				big = append(big, line)
			case len(bytes.Trim(line, " \t\r\n")) == 0:
			default:
				want = append(want, frame(string(line)))
			}
		}
		want = append(want, eof)

		var ids []json.RawMessage
		for i, s := range got {
			if s.TooLarge != nil {
				ids = append(ids, s.TooLarge.ID)
				c := *s.TooLarge
				c.ID = nil
				got[i].TooLarge = &c
			}
			require.NotContains(t, s.Frame, "\n", "a frame with a newline")
			require.LessOrEqual(t, len(s.Frame), lim, "a frame over the limit")
		}
		require.Equal(t, want, got, "%d-byte input, limit %d, %s reads", len(input), lim, ch.name)

		for i, id := range ids {
			if id != nil {
				require.True(t, isValidID(id), "oversized frame's id %q is not a valid id", id)
			}
			if wantID, ok := scannedID(big[i]); ok {
				require.Equal(t, wantID, id, "id of oversized line %.200q", big[i])
			}
		}
	})
}

// scannedID is the id the Reader must report for an oversized line, when
// the line is well-formed enough for the rule to be exact: what Parse
// reads, if it is a valid id that fits the 1 KiB the scan keeps.
func scannedID(line []byte) (json.RawMessage, bool) {
	if !utf8.Valid(line) || !json.Valid(line) {
		return nil, false
	}
	m, _ := jsonrpc.Parse(line)
	if m.ID == nil || !isValidID(m.ID) {
		return nil, true
	}
	span, _ := m.IDSpan()
	start := bytes.LastIndexByte(line[:span.Start], ':') + 1
	end := span.End + len(line[span.End:]) - len(bytes.TrimLeft(line[span.End:], " \t\r\n"))
	if end-start > maxCapturedID {
		return nil, true
	}
	return m.ID, true
}

// FuzzParse checks Parse against a reference built on encoding/json's
// tokenizer, and checks what a successful parse promises: the frame is JSON,
// encoding/json reads the same members (by exact name and by Go's
// case-insensitive struct matching), and a request rewritten with WithID
// parses back to the new id.
func FuzzParse(f *testing.F) {
	for _, c := range validCases() {
		if len(c.frame) <= maxSeed {
			f.Add([]byte(c.frame))
		}
	}
	for _, c := range invalidCases() {
		if len(c.frame) <= maxSeed {
			f.Add([]byte(c.frame))
		}
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest(100) + `}`))
	for _, id := range idCases() {
		f.Add([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"m","params":{"_meta":{"progressToken":` + id + `}}}`))
	}
	f.Add([]byte(tokenRequest))
	// Past the members Parse keeps from its check, and twice over.
	f.Add([]byte(`{"a":0,"jsonrpc":"2.0","b":1,"c":2,"d":3,"e":4,"f":5,"g":6,"method":"m","id":1}`))
	f.Add([]byte(`{"jsonrpc":"2.0","b":1,"c":2,"d":3,"e":4,"f":5,"g":6,"method":"m","id":1,"id":2}`))

	f.Fuzz(func(t *testing.T, frame []byte) {
		orig := bytes.Clone(frame)
		m, err := jsonrpc.Parse(frame)
		require.NotNil(t, m, "Parse returned no message")
		require.Equal(t, orig, frame, "Parse modified its input")

		want := refParse(frame)
		got := outcomeOf(t, m, err)
		require.Equal(t, want, got, "Parse(%q): %v", frame, err)
		if json.Valid(frame) && utf8.Valid(frame) {
			// The members Parse kept from its check, and those
			// ParseChecked finds walking the frame, read the same.
			mc, errc := jsonrpc.ParseChecked(frame)
			require.Equal(t, got, outcomeOf(t, mc, errc), "ParseChecked(%q): %v", frame, errc)
			require.Equal(t, view(m), view(mc), "ParseChecked(%q)", frame)
		}
		if m.ID != nil {
			span, ok := m.IDSpan()
			require.True(t, ok)
			require.Equal(t, string(m.ID), string(frame[span.Start:span.End]), "IDSpan of %q", frame)
			require.True(t, isValidID(m.ID) || string(m.ID) == "null", "id %q", m.ID)
		}
		if err != nil {
			return
		}

		require.True(t, json.Valid(frame), "Parse accepted %q", frame)
		checkAgainstDecoder(t, m)

		if m.Kind == jsonrpc.KindRequest {
			out := m.WithID([]byte("999"))
			m2, err := jsonrpc.Parse(out)
			require.NoError(t, err, "WithID(999) of %q made %q", frame, out)
			require.Equal(t, envelope{m.Kind, m.Method, raw("999"), m2.Params, nil, nil}, view(m2), "WithID(999) of %q", frame)
			require.Equal(t, string(m.Params), string(m2.Params), "params after WithID(999) of %q", frame)
		}
		if s, ok := m.ParamsPath("_meta", "progressToken"); ok {
			require.Equal(t, decodedToken(t, m.Params), json.RawMessage(frame[s.Start:s.End]), "progress token of %q", frame)
		} else if m.Params != nil {
			require.Nil(t, decodedToken(t, m.Params), "progress token of %q", frame)
		}
	})
}

// decodedToken is params._meta.progressToken as encoding/json reads it
// (the last duplicate wins there too), or nil.
func decodedToken(t *testing.T, params json.RawMessage) json.RawMessage {
	t.Helper()
	var p, meta map[string]json.RawMessage
	if params[0] != '{' || json.Unmarshal(params, &p) != nil {
		return nil
	}
	if v := bytes.TrimSpace(p["_meta"]); len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &meta) != nil {
		return nil
	}
	return meta["progressToken"]
}

// refOutcome is what Parse decides about a frame.
type refOutcome struct {
	Code   int
	Reason string
	Kind   jsonrpc.Kind
	Method string
	ID     json.RawMessage
}

// refParse is an independent statement of the envelope rules, over
// encoding/json's tokenizer: a reserved member may appear once and only in
// its exact spelling (names compared after unescaping), with the types the
// protocol gives it. The id is reported when exactly one exact "id" exists
// and it is valid (or null on an error response), whatever else is wrong.
func refParse(frame []byte) refOutcome {
	if !utf8.Valid(frame) || !json.Valid(frame) {
		return refOutcome{Code: jsonrpc.CodeParseError, Reason: jsonrpc.ReasonParseError}
	}
	bad := func(id json.RawMessage) refOutcome {
		return refOutcome{Code: jsonrpc.CodeInvalidRequest, Reason: jsonrpc.ReasonInvalidRequest, ID: id}
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return bad(nil)
	}
	reserved := []string{"jsonrpc", "id", "method", "params", "result", "error"}
	members := map[string][]json.RawMessage{}
	problem := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err) // json.Valid said it was fine
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			panic(err)
		}
		for _, r := range reserved {
			switch {
			case name == r:
				members[r] = append(members[r], v)
			case strings.EqualFold(name, r):
				problem = true
			}
		}
	}
	one := func(r string) (json.RawMessage, bool) {
		if len(members[r]) > 1 {
			problem = true
		}
		if len(members[r]) == 0 {
			return nil, false
		}
		return members[r][0], true
	}
	version, hasVersion := one("jsonrpc")
	method, hasMethod := one("method")
	params, hasParams := one("params")
	_, hasResult := one("result")
	errObj, hasError := one("error")
	idv, hasID := one("id")

	var id json.RawMessage
	switch {
	case len(members["id"]) != 1:
	case isValidID(idv):
		id = idv
	case string(idv) == "null" && hasError && !hasMethod:
		id = idv
	default:
		problem = true
	}
	var s string
	switch {
	case problem,
		!hasVersion,
		json.Unmarshal(version, &s) != nil || s != "2.0",
		hasParams && params[0] != '{' && params[0] != '[':
		return bad(id)
	}
	if hasMethod {
		var name string
		if method[0] != '"' || hasResult || hasError || json.Unmarshal(method, &name) != nil {
			return bad(id)
		}
		if hasID {
			return refOutcome{Kind: jsonrpc.KindRequest, Method: name, ID: id}
		}
		return refOutcome{Kind: jsonrpc.KindNotification, Method: name}
	}
	switch {
	case hasParams, hasResult == hasError, !hasID:
		return bad(id)
	case hasResult && string(id) == "null":
		return bad(id)
	case hasResult:
		return refOutcome{Kind: jsonrpc.KindResult, ID: id}
	case errObj[0] != '{':
		return bad(id)
	}
	return refOutcome{Kind: jsonrpc.KindError, ID: id}
}

// outcomeOf is what Parse made of a frame, as refParse says it.
func outcomeOf(t *testing.T, m *jsonrpc.Message, err error) refOutcome {
	got := refOutcome{Kind: m.Kind, Method: m.Method, ID: m.ID}
	if err != nil {
		var e *jsonrpc.Error
		require.ErrorAs(t, err, &e)
		got.Code, got.Reason, got.Method = e.Code, e.Reason, ""
	}
	return got
}

// TestParseMatchesReference runs the tables through the reference too, so
// that the reference the fuzzer trusts is itself checked.
func TestParseMatchesReference(t *testing.T) {
	frames := []string{tokenRequest}
	for _, c := range validCases() {
		frames = append(frames, c.frame)
	}
	for _, c := range invalidCases() {
		frames = append(frames, c.frame)
	}
	for _, frame := range frames {
		m, err := jsonrpc.Parse([]byte(frame))
		got := refOutcome{Kind: m.Kind, Method: m.Method, ID: m.ID}
		var e *jsonrpc.Error
		if errors.As(err, &e) {
			got.Code, got.Reason, got.Method = e.Code, e.Reason, ""
		}
		assert.Equal(t, refParse([]byte(frame)), got, "frame %.200q", frame)
	}
}

// FuzzSplice checks Splice against a naive reference on arbitrary bytes and
// edits in any order, and, when the input is a request with a progress
// token, checks the id-and-token rewrite end to end.
func FuzzSplice(f *testing.F) {
	cuts := func(p ...uint16) []byte {
		var b []byte
		for _, v := range p {
			b = binary.LittleEndian.AppendUint16(b, v)
		}
		return b
	}
	f.Add([]byte(tokenRequest), cuts(3, 9, 20, 20, 40, 41), "A|B|C", uint8(5))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":"t"}}}`), cuts(0, 1), "", uint8(1))
	f.Add([]byte("abcdef"), cuts(1, 2, 3, 4, 5, 6), "x||yy", uint8(3))
	f.Add([]byte(""), cuts(0, 0), "z", uint8(0))
	for _, c := range validCases() {
		if len(c.frame) <= maxSeed {
			f.Add([]byte(c.frame), cuts(1, 2, 5), "|", uint8(2))
		}
	}
	f.Add([]byte("0"), cuts(0, 0, 1, 0), "A|B", uint8(1)) // an insertion given after a replacement at the same byte

	f.Fuzz(func(t *testing.T, frame, cutBytes []byte, vals string, perm uint8) {
		orig := bytes.Clone(frame)
		var pos []int
		for i := 0; i+1 < len(cutBytes) && len(pos) < 6; i += 2 {
			pos = append(pos, int(binary.LittleEndian.Uint16(cutBytes[i:]))%(len(frame)+1))
		}
		slices.Sort(pos)
		values := strings.Split(vals, "|")
		var edits []jsonrpc.Edit
		for i := 0; i+1 < len(pos); i += 2 {
			span := jsonrpc.Span{Start: pos[i], End: pos[i+1]}
			if n := len(edits); n > 0 && span.Start == span.End && edits[n-1].Span == span {
				continue // two insertions at one byte: no order is right
			}
			edits = append(edits, jsonrpc.Edit{Span: span, Value: []byte(values[len(edits)%len(values)])})
		}
		want := refSplice(frame, edits) // edits are in order here
		permute(edits, int(perm))
		got := jsonrpc.Splice(frame, edits...)
		require.Equal(t, string(want), string(got), "Splice(%q, %v)", frame, edits)
		require.Equal(t, orig, frame, "Splice modified its input")

		m, err := jsonrpc.Parse(frame)
		if err != nil || m.Kind != jsonrpc.KindRequest {
			return
		}
		tok, ok := m.ParamsPath("_meta", "progressToken")
		if !ok {
			return
		}
		id, _ := m.IDSpan()
		rewrite := []jsonrpc.Edit{{Span: id, Value: []byte(`"mux-1"`)}, {Span: tok, Value: []byte(`424242`)}}
		if perm&1 == 1 {
			rewrite[0], rewrite[1] = rewrite[1], rewrite[0]
		}
		out := jsonrpc.Splice(frame, rewrite...)
		require.True(t, json.Valid(out), "rewrite of %q made %q", frame, out)
		m2, err := jsonrpc.Parse(out)
		require.NoError(t, err, "rewrite of %q made %q", frame, out)
		require.Equal(t, envelope{jsonrpc.KindRequest, m.Method, raw(`"mux-1"`), m2.Params, nil, nil}, view(m2), "rewrite of %q", frame)
		tok2, ok := m2.ParamsPath("_meta", "progressToken")
		require.True(t, ok, "no token after the rewrite of %q", frame)
		require.Equal(t, "424242", string(out[tok2.Start:tok2.End]), "token after the rewrite of %q", frame)
	})
}

// refSplice applies sorted, non-overlapping edits the slow way, from the back.
func refSplice(frame []byte, edits []jsonrpc.Edit) []byte {
	out := bytes.Clone(frame)
	for i := len(edits) - 1; i >= 0; i-- {
		e := edits[i]
		out = slices.Concat(out[:e.Start], e.Value, out[e.End:])
	}
	return out
}

// permute reorders edits by the n-th permutation (mod their count's factorial).
func permute(edits []jsonrpc.Edit, n int) {
	for i := len(edits); i > 1; i-- {
		j := n % i
		n /= i
		edits[i-1], edits[j] = edits[j], edits[i-1]
	}
}
