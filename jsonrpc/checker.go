package jsonrpc

import (
	"encoding/binary"
	"unicode/utf8"
)

// checker checks JSON fed to it in pieces, as a long line is read: on the
// concatenation of what it was fed it agrees with Valid (UTF-8 included).
// A Reader feeds it each buffer-full of a large frame while those bytes are
// still in the cache, so that the frame needs no second pass over its
// megabytes before Parse trusts it.
type checker struct {
	stack []byte // '{' or '[' for each open container
	state checkState
	lit   string // what is left of a literal (true, false, null)
	hex   int    // hex digits left of a \u escape
	key   bool   // the string being read is a member name
	part  [utf8.UTFMax]byte
	nPart int  // bytes in part: a UTF-8 sequence cut by the end of a piece
	bad   bool // not JSON, whatever follows
}

type checkState uint8

const (
	cValue        checkState = iota // a value is due
	cValueOrClose                   // after '[': a value or ']'
	cKeyOrClose                     // after '{': a member name or '}'
	cKey                            // after ',' in an object: a member name
	cColon                          // after a member name
	cAfter                          // after a value: ',' or a close; at the top, space only
	cString
	cEscape
	cHex
	cLiteral
	cMinus   // after '-'
	cZero    // a leading 0
	cInt     // in the integer part
	cDot     // after '.'
	cFrac    // in the fraction
	cExp     // after 'e' or 'E'
	cExpSign // after the exponent's sign
	cExpInt  // in the exponent
)

// feed checks the next piece.
func (c *checker) feed(p []byte) {
	for i := 0; i < len(p) && !c.bad; {
		if c.state == cString {
			i = c.str(p, i)
			continue
		}
		i += c.step(p[i])
	}
}

// valid reports whether what was fed is one JSON value in valid UTF-8.
func (c *checker) valid() bool {
	if c.bad || c.nPart > 0 || len(c.stack) > 0 {
		return false
	}
	switch c.state {
	case cAfter, cZero, cInt, cFrac, cExpInt:
		return true
	}
	return false
}

// str reads a string's bytes from p[i:], escapes included, up to its
// closing quote or the end of the piece, checks their UTF-8 in one call,
// and returns where to go on.
func (c *checker) str(p []byte, i int) int {
	if c.nPart > 0 {
		return c.finishRune(p, i)
	}
	j, end := c.strEnd(p, i)
	run := p[i:j]
	if j == len(p) {
		run = c.keepPart(run)
	}
	if !utf8.Valid(run) {
		c.bad = true
		return len(p)
	}
	return end
}

// strEnd finds where the string's bytes from p[i:] end, j (at the closing
// quote, at an escape the piece cuts, or at the end), and where the checker
// goes on, end. It sets the state that follows.
func (c *checker) strEnd(p []byte, i int) (j, end int) {
	j = i
	for {
		// Eight bytes at a time while none of them ends the run of plain
		// ones; the byte loop below finds which one does.
		for j+8 <= len(p) && !special(binary.LittleEndian.Uint64(p[j:])) {
			j += 8
		}
		for j < len(p) && plain[p[j]] {
			j++
		}
		switch {
		case j == len(p):
			return j, j
		case p[j] == '"':
			c.state = cAfter
			if c.key {
				c.state = cColon
			}
			return j, j + 1
		case p[j] != '\\':
			c.bad = true // a control character
			return j, len(p)
		case j+6 <= len(p) && p[j+1] == 'u' && isHex(p[j+2]) && isHex(p[j+3]) && isHex(p[j+4]) && isHex(p[j+5]):
			j += 6
		case j+2 <= len(p) && p[j+1] != 'u':
			if c.escape(p[j+1]); c.bad {
				return j, len(p)
			}
			j += 2
		default: // an escape the piece cuts, or a bad \u: byte by byte
			c.state = cEscape
			return j, j + 1
		}
	}
}

// keepPart moves a UTF-8 sequence that the end of the piece cut short out
// of run, into c.part, and returns the rest of run.
func (c *checker) keepPart(run []byte) []byte {
	for k := len(run) - 1; k >= 0 && k > len(run)-utf8.UTFMax; k-- {
		if !utf8.RuneStart(run[k]) {
			continue
		}
		if !utf8.FullRune(run[k:]) {
			c.nPart = copy(c.part[:], run[k:])
			return run[:k]
		}
		break
	}
	return run
}

// finishRune completes the cut sequence from p[i:] and checks it.
func (c *checker) finishRune(p []byte, i int) int {
	for i < len(p) && !utf8.FullRune(c.part[:c.nPart]) {
		c.part[c.nPart] = p[i]
		c.nPart++
		i++
	}
	if !utf8.FullRune(c.part[:c.nPart]) {
		return i // the piece ended first
	}
	if !utf8.Valid(c.part[:c.nPart]) {
		c.bad = true
	}
	c.nPart = 0
	return i
}

// step takes one byte outside a string's plain run. It returns how many
// bytes it consumed: 0 when a number ended at b, which is then read again.
func (c *checker) step(b byte) int {
	switch c.state {
	case cValue, cValueOrClose, cKeyOrClose, cKey, cColon, cAfter:
		c.structural(b)
	case cEscape:
		c.escape(b)
	case cHex:
		c.hexDigit(b)
	case cLiteral:
		c.literal(b)
	default:
		return c.number(b)
	}
	return 1
}

func (c *checker) structural(b byte) {
	switch {
	case b == ' ' || b == '\t' || b == '\n' || b == '\r':
	case c.state == cValue:
		c.value(b)
	case c.state == cValueOrClose && b == ']', c.state == cKeyOrClose && b == '}':
		c.close()
	case c.state == cValueOrClose:
		c.value(b)
	case c.state == cKeyOrClose || c.state == cKey:
		c.state, c.key, c.bad = cString, true, b != '"'
	case c.state == cColon:
		c.state, c.bad = cValue, b != ':'
	default:
		c.after(b)
	}
}

// value starts the value that b begins.
func (c *checker) value(b byte) {
	switch b {
	case '"':
		c.state, c.key = cString, false
	case '{', '[':
		if len(c.stack) >= maxNesting {
			c.bad = true
			return
		}
		c.stack = append(c.stack, b)
		c.state = cKeyOrClose
		if b == '[' {
			c.state = cValueOrClose
		}
	case 't':
		c.state, c.lit = cLiteral, "rue"
	case 'f':
		c.state, c.lit = cLiteral, "alse"
	case 'n':
		c.state, c.lit = cLiteral, "ull"
	case '-':
		c.state = cMinus
	case '0':
		c.state = cZero
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		c.state = cInt
	default:
		c.bad = true
	}
}

// after takes what follows a value: a comma or its container's close.
func (c *checker) after(b byte) {
	if len(c.stack) == 0 {
		c.bad = true // only space may follow the top-level value
		return
	}
	top := c.stack[len(c.stack)-1]
	switch {
	case b == ',' && top == '[':
		c.state = cValue
	case b == ',':
		c.state = cKey
	case b == ']' && top == '[', b == '}' && top == '{':
		c.close()
	default:
		c.bad = true
	}
}

func (c *checker) close() {
	c.stack = c.stack[:len(c.stack)-1]
	c.state = cAfter
}

func (c *checker) escape(b byte) {
	switch b {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		c.state = cString
	case 'u':
		c.state, c.hex = cHex, 4
	default:
		c.bad = true
	}
}

func (c *checker) hexDigit(b byte) {
	if !isHex(b) {
		c.bad = true
		return
	}
	if c.hex--; c.hex == 0 {
		c.state = cString
	}
}

func (c *checker) literal(b byte) {
	if b != c.lit[0] {
		c.bad = true
		return
	}
	if c.lit = c.lit[1:]; c.lit == "" {
		c.state = cAfter
	}
}

// number takes a byte of a number, or the byte after one (returning 0).
func (c *checker) number(b byte) int {
	digit := b >= '0' && b <= '9'
	switch {
	case digit && c.state != cZero && c.state != cExp && c.state != cExpSign && c.state != cMinus && c.state != cDot:
		return 1 // more of the integer, fraction or exponent
	case c.state == cMinus && b == '0':
		c.state = cZero
	case c.state == cMinus && digit:
		c.state = cInt
	case c.state == cDot && digit:
		c.state = cFrac
	case (c.state == cExp || c.state == cExpSign) && digit:
		c.state = cExpInt
	case c.state == cExp && (b == '+' || b == '-'):
		c.state = cExpSign
	case (c.state == cZero || c.state == cInt) && b == '.':
		c.state = cDot
	case (c.state == cZero || c.state == cInt || c.state == cFrac) && (b == 'e' || b == 'E'):
		c.state = cExp
	case c.state == cZero || c.state == cInt || c.state == cFrac || c.state == cExpInt:
		c.state = cAfter // the number ended; b belongs to what follows
		return 0
	default:
		c.bad = true
	}
	return 1
}
