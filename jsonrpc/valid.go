package jsonrpc

import (
	"encoding/binary"
	"unicode/utf8"
)

// valid reports whether b is one JSON value, with optional white space
// around it, exactly as encoding/json.Valid decides (including its limit of
// 10000 levels of nesting), but several times faster on long strings: every
// message from a server crosses the one goroutine that reads its stdout, so
// the speed of this check bounds what a shared server can deliver. It does
// not check UTF-8; the caller does, with utf8.Valid.
func valid(b []byte) bool { return validWith(b, nil) }

// validWith is valid that also records the members of the top-level
// object in top, when not nil.
func validWith(b []byte, top *topMembers) bool {
	v := validator{b: b, top: top}
	v.space()
	if !v.value() {
		return false
	}
	v.space()
	return v.i == len(b)
}

const maxNesting = 10000

type validator struct {
	b     []byte
	i     int
	depth int
	top   *topMembers // where the top-level object's members go; nil: nowhere
}

// topMembers are the members of a frame's top-level object, as the check
// that the frame is JSON found them: Parse reads the envelope from them
// rather than walk the frame a second time. A frame of more members than
// it holds is walked again.
type topMembers struct {
	n    int // how many there were, even past the array's room
	keys [maxTop]Span
	vals [maxTop]Span
}

const maxTop = 8

// member records one of the top-level object's members.
func (v *validator) member(key, val Span) {
	if t := v.top; t != nil && v.depth == 1 {
		if t.n < maxTop {
			t.keys[t.n], t.vals[t.n] = key, val
		}
		t.n++
	}
}

// plain marks the bytes a string may hold without a closer look.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (v *validator) space() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

func (v *validator) value() bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; {
	case c == '"':
		return v.str()
	case c == '{':
		return v.object()
	case c == '[':
		return v.array()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return v.number()
	}
	return false
}

func (v *validator) literal(word string) bool {
	if len(v.b)-v.i < len(word) || string(v.b[v.i:v.i+len(word)]) != word {
		return false
	}
	v.i += len(word)
	return true
}

func (v *validator) object() bool {
	if v.depth++; v.depth > maxNesting {
		return false
	}
	v.i++
	v.space()
	if v.i < len(v.b) && v.b[v.i] == '}' {
		v.i++
		v.depth--
		return true
	}
	for {
		key := v.i
		if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str() {
			return false
		}
		keyEnd := v.i
		v.space()
		if v.i >= len(v.b) || v.b[v.i] != ':' {
			return false
		}
		v.i++
		v.space()
		val := v.i
		if !v.value() {
			return false
		}
		v.member(Span{key, keyEnd}, Span{val, v.i})
		if more, ok := v.next('}'); !more {
			return ok
		}
	}
}

func (v *validator) array() bool {
	if v.depth++; v.depth > maxNesting {
		return false
	}
	v.i++
	v.space()
	if v.i < len(v.b) && v.b[v.i] == ']' {
		v.i++
		v.depth--
		return true
	}
	for {
		if !v.value() {
			return false
		}
		if more, ok := v.next(']'); !more {
			return ok
		}
	}
}

// next reads what follows a member or an element: a comma, after which
// more follows, or close, which ends the container (ok); anything else is
// not JSON.
func (v *validator) next(close byte) (more, ok bool) {
	v.space()
	if v.i >= len(v.b) {
		return false, false
	}
	switch v.b[v.i] {
	case ',':
		v.i++
		v.space()
		return true, true
	case close:
		v.i++
		v.depth--
		return false, true
	}
	return false, false
}

func (v *validator) str() bool {
	b, i := v.b, v.i+1
	for {
		// Eight bytes at a time while none of them ends the run of plain
		// ones; the byte loop below finds which one does.
		for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '"':
			v.i = i + 1
			return true
		case '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

// special reports whether any of the eight bytes in w is a quote, a
// backslash or a control character: the bytes that are not plain in a
// string. (Each test is exact for "any byte": x-0x01.. borrows into a
// byte's high bit only from a byte that is zero, or below n, and ^x drops
// the bytes whose high bit was already set.)
func special(w uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((q-ones)&^q|(bs-ones)&^bs|(w-ones*0x20)&^w)&highs != 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (v *validator) number() bool {
	b, i := v.b, v.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	v.i = i
	return true
}

// Valid reports whether b is valid UTF-8 JSON: one value, white space
// around it allowed.
func Valid(b []byte) bool { return utf8.Valid(b) && valid(b) }

// CheckJSON returns nil when b is valid UTF-8 JSON, and otherwise the parse
// error that says which of the two it is not: a line of plain text is "not
// JSON", not a matter of its encoding.
func CheckJSON(b []byte) *Error { return checkJSON(b, nil) }

// checkJSON is CheckJSON that also records the members of the top-level
// object in top, when not nil.
func checkJSON(b []byte, top *topMembers) *Error {
	switch {
	case !utf8.Valid(b):
		return &Error{Code: CodeParseError, Message: "parse error: not valid UTF-8", Reason: ReasonParseError}
	case !validWith(b, top):
		return &Error{Code: CodeParseError, Message: "parse error: not JSON", Reason: ReasonParseError}
	}
	return nil
}
