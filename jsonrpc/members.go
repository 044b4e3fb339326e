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

// FilterMembers returns a copy of the valid JSON object obj without the
// members named in drop, and with the value of the member named replace
// set to value when value is not nil. The members kept keep their order;
// the space between members is left out. nil when obj is not an object.
func FilterMembers(obj []byte, drop []string, replace string, value []byte) []byte {
	start := skipSpace(obj, 0)
	if start >= len(obj) || obj[start] != '{' {
		return nil
	}
	out := make([]byte, 1, len(obj)+len(value))
	out[0] = '{'
	eachMember(obj, start, func(key []byte, escaped bool, val Span) bool {
		for _, name := range drop {
			if keyEquals(key, escaped, name) {
				return true
			}
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		if escaped {
			out = append(out, key...)
		} else {
			out = append(append(append(out, '"'), key...), '"')
		}
		out = append(out, ':')
		if value != nil && keyEquals(key, escaped, replace) {
			out = append(out, value...)
		} else {
			out = append(out, obj[val.Start:val.End]...)
		}
		return true
	})
	return append(out, '}')
}
