package session

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// clientFrame is one masked frame as a client sends it.
func clientFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = binary.BigEndian.AppendUint16(append(b, 0x80|126), uint16(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, 0x80|127), uint64(n))
	}
	b = append(b, 1, 2, 3, 4) // the mask key; the payload's bytes do not matter here
	return append(b, payload...)
}

// TestWholeMessage: true exactly when the buffered bytes hold, after any
// control frames, every frame of one data message; and never a panic on a
// cut, whatever the cut.
func TestWholeMessage(t *testing.T) {
	short := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	mid := bytes.Repeat([]byte("x"), 300)
	long := bytes.Repeat([]byte("y"), 70000)
	cat := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	tests := []struct {
		name string
		b    []byte
		want bool
	}{
		{"nothing", nil, false},
		{"a text message", clientFrame(true, 0x1, short), true},
		{"16-bit length", clientFrame(true, 0x1, mid), true},
		{"64-bit length", clientFrame(true, 0x1, long), true},
		{"an empty message", clientFrame(true, 0x1, nil), true},
		{"a binary message", clientFrame(true, 0x2, short), true},
		{"a ping alone", clientFrame(true, 0x9, []byte("p")), false},
		{"a close alone", clientFrame(true, 0x8, nil), false},
		{"a ping, then a message", cat(clientFrame(true, 0x9, nil), clientFrame(true, 0x1, short)), true},
		{"a first fragment", clientFrame(false, 0x1, short), false},
		{"fragments to the end", cat(clientFrame(false, 0x1, short), clientFrame(false, 0x0, mid), clientFrame(true, 0x0, short)), true},
		{"fragments with a ping between", cat(clientFrame(false, 0x1, short), clientFrame(true, 0xA, nil), clientFrame(true, 0x0, short)), true},
		{"a message and part of the next", cat(clientFrame(true, 0x1, short), clientFrame(true, 0x1, short)[:5]), true},
	}
	for _, tt := range tests {
		if got := wholeMessage(tt.b); got != tt.want {
			t.Errorf("%s: wholeMessage = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Every cut of a whole message is not one, and does not panic.
	for _, whole := range [][]byte{clientFrame(true, 0x1, short), clientFrame(true, 0x1, mid), clientFrame(true, 0x1, long),
		cat(clientFrame(true, 0x9, nil), clientFrame(false, 0x1, short), clientFrame(true, 0x0, mid))} {
		for i := range len(whole) {
			if wholeMessage(whole[:i]) {
				t.Fatalf("a cut at %d of %d bytes counts as a whole message", i, len(whole))
			}
		}
		if !wholeMessage(whole) {
			t.Fatalf("the whole %d bytes do not count", len(whole))
		}
	}
}
