package jsonrpc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Unquote decodes the JSON string raw (with its quotes) as encoding/json
// would; false when raw is not a string. A string with no escape in it,
// the common case, is decoded without a decoder.
func Unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) && !hasControl(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' {
			return true
		}
	}
	return false
}

// DropMembers appends to edits those that take the members named in drop
// out of the object at span s of the valid JSON frame, each with the comma
// that joined it to the rest, so that Splice makes the object without
// them in one copy of the frame. The members kept keep their order and
// spacing. A frame with none of them gets no edit.
func DropMembers(frame []byte, s Span, drop []string, edits []Edit) []Edit {
	prevEnd, kept, run := 0, false, -1 // run: where a leading run of dropped members starts
	at := skipSpace(frame, s.Start)
	if at >= s.End || frame[at] != '{' {
		return edits
	}
	eachMember(frame, at, func(key []byte, escaped bool, val Span) bool {
		start := cap(frame) - cap(key) // the key's opening quote
		if !escaped {
			start--
		}
		dropped := false
		for _, name := range drop {
			if keyEquals(key, escaped, name) {
				dropped = true
				break
			}
		}
		switch {
		case dropped && kept: // from the end of the member before it
			edits = append(edits, Edit{Span: Span{Start: prevEnd, End: val.End}})
		case dropped && run < 0:
			run = start
		case !dropped && run >= 0: // up to the first member kept
			edits = append(edits, Edit{Span: Span{Start: run, End: start}})
			run = -1
		}
		kept = kept || !dropped
		prevEnd = val.End
		return true
	})
	if run >= 0 { // every member dropped
		edits = append(edits, Edit{Span: Span{Start: run, End: prevEnd}})
	}
	return edits
}
