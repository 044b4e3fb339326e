package editors

import (
	"bytes"
	"strings"
)

// stripJSONC turns JSON with comments (// and /* */) and trailing commas,
// as VS Code writes it, into JSON. Comments and the commas become spaces,
// so offsets and lines stay where they were; strings are never touched.
func stripJSONC(data []byte) []byte {
	out := bytes.Clone(data)
	if bytes.HasPrefix(out, []byte("\xef\xbb\xbf")) { // a byte order mark
		copy(out, "   ")
	}
	outsideStrings(out, func(i int) int { return blankComment(out, i) })
	// Now that comments are blanks, a comma followed only by blanks and a
	// closing bracket is a trailing one.
	outsideStrings(out, func(i int) int {
		if out[i] == ',' {
			j := i + 1
			for j < len(out) && strings.IndexByte(" \t\r\n", out[j]) >= 0 {
				j++
			}
			if j < len(out) && (out[j] == '}' || out[j] == ']') {
				out[i] = ' '
			}
		}
		return i
	})
	return out
}

// outsideStrings calls at with the index of each byte of out that is not
// inside a JSON string; at returns the index of the last byte it handled.
func outsideStrings(out []byte, at func(i int) int) {
	inString := false
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case inString && c == '\\':
			i++ // the escaped character, which may be a quote
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		default:
			i = at(i)
		}
	}
}

// blankComment blanks the comment starting at out[i], if one does,
// keeping its line breaks, and returns the index of its last byte.
func blankComment(out []byte, i int) int {
	if out[i] != '/' || i+1 >= len(out) {
		return i
	}
	switch out[i+1] {
	case '/':
		for ; i < len(out) && out[i] != '\n' && out[i] != '\r'; i++ {
			out[i] = ' '
		}
	case '*':
		out[i], out[i+1] = ' ', ' '
		for i += 2; i < len(out); i++ {
			if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
				out[i], out[i+1] = ' ', ' '
				return i + 1
			}
			if out[i] != '\n' && out[i] != '\r' {
				out[i] = ' '
			}
		}
	}
	return i
}

// offsetLineCol converts the offset of a byte in data to its 1-based line
// and column (in bytes).
func offsetLineCol(data []byte, offset int) (line, col int) {
	offset = min(max(offset, 0), len(data))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, offset - bytes.LastIndexByte(before, '\n')
}
