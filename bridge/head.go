package bridge

import "bytes"

// maxHeadValue bounds the id or method a frameScan keeps; a longer one
// makes the scan give up (odd).
const maxHeadValue = 128

// frameScan reads the top level of one JSON-RPC frame, fed to it in
// pieces as they arrive, keeping only what the bridge needs: whether it is
// a batch, its id and method as written, and whether it carries a result
// or an error. It stops once it has an id and either a method or an
// outcome: the rest of the frame is only copied. It does not check the
// frame, and gives up (odd) on what it cannot read plainly (an escaped
// member name, a second id, a value that is no id); a whole line is then
// parsed, as every line was before the bridge became a pump.
type frameScan struct {
	st      scanState
	depth   int  // nesting inside a skipped value
	inStr   bool // inside a string of a skipped value
	esc     bool // the last byte of a string was a backslash
	key     [8]byte
	keyN    int
	role    byte // the value being read: 'i' the id, 'm' the method, 0 another
	val     [maxHeadValue]byte
	valN    int
	id      [maxHeadValue]byte
	idN     int
	method  [32]byte
	methodN int

	hasID, hasMethod, outcome, isError, batch, odd, done bool
}

type scanState uint8

const (
	sBegin    scanState = iota // before the opening brace
	sKey                       // before a member name, or the closing brace
	sKeyStr                    // in a member name
	sColon                     // after a member name
	sValue                     // before a member's value
	sCapStr                    // in a string value kept (id, method)
	sCapWord                   // in a number or literal value kept (id)
	sSkipStr                   // in a string value skipped
	sSkipWord                  // in a number or literal skipped
	sSkipNest                  // in an object or array skipped
	sAfter                     // after a member's value
)

// idOf is the frame's id as written, nil when it has none.
func (s *frameScan) idOf() []byte {
	if !s.hasID {
		return nil
	}
	return s.id[:s.idN]
}

// methodIs reports whether the frame's method is name (written plainly).
func (s *frameScan) methodIs(name string) bool {
	m := s.method[:s.methodN]
	return s.hasMethod && len(m) == len(name)+2 && string(m[1:len(m)-1]) == name
}

// feed scans the next piece of the frame.
func (s *frameScan) feed(p []byte) {
	for i := 0; i < len(p) && !s.done; {
		switch s.st {
		case sCapStr, sCapWord:
			i = s.capture(p, i)
		case sSkipStr:
			var closed bool
			if i, closed = s.skipString(p, i); closed {
				s.st = sAfter
			}
		case sSkipWord:
			i = s.skipWord(p, i)
		case sSkipNest:
			i = s.skipNest(p, i)
		default:
			s.structural(p[i])
			i++
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// structural takes one byte between the frame's top-level tokens.
func (s *frameScan) structural(c byte) {
	if isSpace(c) && s.st != sKeyStr {
		return
	}
	switch {
	case s.st == sBegin && c == '{':
		s.st = sKey
	case s.st == sBegin && c == '[':
		s.batch, s.done = true, true
	case s.st == sKey && c == '"':
		s.st, s.keyN = sKeyStr, 0
	case s.st == sKeyStr && c == '"':
		s.st = sColon
	case s.st == sKeyStr && c != '\\':
		if s.keyN < len(s.key) {
			s.key[s.keyN] = c
		}
		s.keyN++
	case s.st == sColon && c == ':':
		s.st = sValue
	case s.st == sValue:
		s.value(c)
	case s.st == sAfter && c == ',':
		s.st = sKey
	case (s.st == sAfter || s.st == sKey) && c == '}':
		s.done = true
	default:
		s.odd, s.done = true, true
	}
}

// value takes the first byte of a member's value.
func (s *frameScan) value(c byte) {
	key := ""
	if s.keyN <= len(s.key) {
		key = string(s.key[:s.keyN])
	}
	s.role, s.valN = 0, 0
	switch key {
	case "id":
		s.role = 'i'
	case "method":
		s.role = 'm'
	case "result", "error":
		s.outcome, s.isError = true, key == "error"
		s.done = s.hasID
	}
	switch {
	case s.role != 0 && (c == '{' || c == '[') || s.role == 'i' && s.hasID:
		s.odd, s.done = true, true
	case s.role != 0:
		s.st = sCapWord
		if c == '"' {
			s.st = sCapStr
		}
		s.val[0], s.valN = c, 1
	case c == '"':
		s.st = sSkipStr
	case c == '{' || c == '[':
		s.st, s.depth, s.inStr = sSkipNest, 1, false
	default:
		s.st = sSkipWord
	}
}

// capture keeps the bytes of an id or a method, up to the byte after it.
func (s *frameScan) capture(p []byte, i int) int {
	for ; i < len(p); i++ {
		c := p[i]
		if s.st == sCapWord && (c == ',' || c == '}' || isSpace(c)) {
			s.kept()
			return i // the byte after the value is the next state's
		}
		if s.valN == len(s.val) || c == '\\' { // long, or escaped: not read
			s.odd, s.done = true, true
			return len(p)
		}
		s.val[s.valN] = c
		s.valN++
		if s.st == sCapStr && c == '"' && s.valN > 1 {
			s.kept()
			return i + 1
		}
	}
	return i
}

// kept files the value just captured as the frame's id or method.
func (s *frameScan) kept() {
	s.st = sAfter
	v := s.val[:s.valN]
	if s.role == 'm' {
		if len(v) > len(s.method) {
			v = nil // no method the bridge looks for is that long
		}
		s.methodN = copy(s.method[:], v)
		s.hasMethod = true
	} else {
		s.idN = copy(s.id[:], v)
		s.hasID = true
	}
	s.done = s.hasID && (s.hasMethod || s.outcome)
}

// skipWord passes a number or a literal.
func (s *frameScan) skipWord(p []byte, i int) int {
	for ; i < len(p); i++ {
		if c := p[i]; c == ',' || c == '}' || isSpace(c) {
			s.st = sAfter
			return i
		}
	}
	return i
}

// skipNest passes an object or an array, whatever its size, its strings
// at the speed of bytes.IndexByte.
func (s *frameScan) skipNest(p []byte, i int) int {
	for i < len(p) {
		if s.inStr {
			var closed bool
			i, closed = s.skipString(p, i)
			s.inStr = !closed
			continue
		}
		switch p[i] {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			if s.depth--; s.depth == 0 {
				s.st = sAfter
				return i + 1
			}
		}
		i++
	}
	return i
}

// skipString passes the rest of a string from p[i]: it returns the index
// after its closing quote, or len(p) and false when p ends first (a
// backslash last is remembered for the next piece).
func (s *frameScan) skipString(p []byte, i int) (int, bool) {
	if s.esc {
		s.esc, i = false, i+1
	}
	for i < len(p) {
		end := len(p) // the next quote, or the end of p
		q := bytes.IndexByte(p[i:], '"')
		if q >= 0 {
			end = i + q
		}
		for {
			b := bytes.IndexByte(p[i:end], '\\')
			if b < 0 {
				break
			}
			if i += b + 2; i > end {
				break
			}
		}
		switch {
		case i > len(p):
			s.esc = true
			return len(p), false
		case i > end:
			continue // that quote was escaped
		case q < 0:
			return len(p), false
		}
		return end + 1, true
	}
	return i, false
}
