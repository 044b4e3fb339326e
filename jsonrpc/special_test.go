package jsonrpc

import (
	"encoding/binary"
	"testing"
)

// TestSpecial: for every byte value at every position among seven plain
// bytes (of each kind: ASCII, and bytes with the high bit set), special
// reports exactly whether that byte is a quote, a backslash or a control
// character.
func TestSpecial(t *testing.T) {
	for _, filler := range []byte{'a', ' ', 0x7f, 0x80, 0xff, '!', '#', '[', ']'} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = filler
				}
				w[pos] = byte(c)
				want := c == '"' || c == '\\' || c < 0x20
				if got := special(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("special(% x) = %v, want %v", w, got, want)
				}
			}
		}
	}
}
