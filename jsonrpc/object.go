package jsonrpc

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Reading and adding members of the JSON objects inside a frame, in place:
// the object is found by span, never decoded whole.

// ParamsString reads the JSON string at a path of a message's params; false
// when it is absent or not a string.
func (m *Message) ParamsString(path ...string) (string, bool) {
	s, ok := m.ParamsPath(path...)
	if !ok {
		return "", false
	}
	var v string
	if json.Unmarshal(m.Frame[s.Start:s.End], &v) != nil {
		return "", false
	}
	return v, true
}

// Member is the raw value of a member of a JSON object; nil when absent.
func Member(obj []byte, name string) json.RawMessage {
	s, ok := FindPath(obj, name)
	if !ok {
		return nil
	}
	return json.RawMessage(obj[s.Start:s.End])
}

// StringMember decodes a string member of a JSON object; false when it is
// absent or not a string.
func StringMember(obj []byte, name string) (string, bool) {
	raw := Member(obj, name)
	var v string
	if raw == nil || raw[0] != '"' || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}

// InsertMembers is the edit that adds members at the start of the object
// at span s of frame, leaving out those have reports present (nil: none).
func InsertMembers(frame []byte, s Span, members map[string]json.RawMessage, have func(string) bool) Edit {
	obj := ObjectOf(members, have)
	inner := obj[1 : len(obj)-1]
	at := s.Start + 1
	if len(inner) > 0 && !EmptyObject(frame[s.Start:s.End]) {
		inner = append(inner, ',')
	}
	return Edit{Span: Span{Start: at, End: at}, Value: inner}
}

// ObjectOf encodes members as a JSON object, in sorted key order, leaving
// out those have reports present (nil: none).
func ObjectOf(members map[string]json.RawMessage, have func(string) bool) []byte {
	keys := make([]string, 0, len(members))
	for k := range members {
		if have == nil || !have(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		kb, _ := json.Marshal(k)
		b = append(append(append(b, kb...), ':'), members[k]...)
	}
	return append(b, '}')
}

// EmptyObject reports whether a JSON object has no members.
func EmptyObject(obj []byte) bool {
	return len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0
}

// SpanOf is the span in frame of sub, a subslice of it (a Message's Params,
// Result or Error in its Frame).
func SpanOf(frame, sub []byte) Span {
	start := cap(frame) - cap(sub)
	return Span{Start: start, End: start + len(sub)}
}
