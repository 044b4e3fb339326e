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
	return Unquote(m.Frame[s.Start:s.End])
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
	if raw == nil {
		return "", false
	}
	return Unquote(raw)
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

// FindMembers finds the members of the JSON object v named in names, in
// one pass over it: where bit i of found is set, spans[i] is where the
// value of names[i] sits in v. Of a name that appears more than once the
// last counts, as in FindPath. v must be valid JSON; a value other than an
// object has no members. names has at most 64 entries, and spans is as
// long as names.
func FindMembers(v []byte, names []string, spans []Span) (found uint64) {
	start := skipSpace(v, 0)
	if start >= len(v) || v[start] != '{' {
		return 0
	}
	eachMember(v, start, func(key []byte, escaped bool, val Span) bool {
		for i, name := range names {
			if keyEquals(key, escaped, name) {
				spans[i], found = val, found|1<<i
			}
		}
		return true
	})
	return found
}
