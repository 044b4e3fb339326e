package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// checkerCases add UTF-8, cut anywhere, to validCases.
var checkerCases = append([]string{
	`"héllo"`, `"€"`, `"😀"`, "\"\xe2\x82\"", "\"\xff\"", "\"\xc3\"", "\"a\xc3\"", "\"\xf0\x9f\x98\x80x\"",
	`{"a":"é","b":[1.5e-3,-0,true]}`, "{\"\xc3\xa9\":1}", "\xc3\xa9", `[1 2]`, `{"a":1 "b":2}`, `[-]`, `[1.]`, `[1e]`,
	`[0,-0.5,1E+2,3e-0]`, `{"a":[]}`, `[{}]`, `{"a":{}}`, `[01]`, `[00]`, `[-01]`, ` 1 `, `1 2`, `[1]]`, `{]`, `[}`,
}, validCases...)

func checkPieces(pieces ...[]byte) bool {
	var c checker
	for _, p := range pieces {
		c.feed(p)
	}
	return c.valid()
}

// TestCheckerAgreesWithValid: fed whole, in two pieces cut at every byte,
// and a byte at a time, the checker says what Valid says of the whole.
func TestCheckerAgreesWithValid(t *testing.T) {
	for _, in := range checkerCases {
		b := []byte(in)
		want := json.Valid(b) && utf8.Valid(b)
		assert.Equal(t, want, checkPieces(b), "whole %.60q", in)
		if len(b) > 200 {
			continue
		}
		for i := range b {
			assert.Equal(t, want, checkPieces(b[:i], b[i:]), "%.60q cut at %d", in, i)
		}
		bytes := make([][]byte, len(b))
		for i := range b {
			bytes[i] = b[i : i+1]
		}
		assert.Equal(t, want, checkPieces(bytes...), "%.60q a byte at a time", in)
	}
}

// TestCheckerLongString: a long string of multi-byte runes, cut in pieces
// of sizes that split runes, is valid; one bad byte in it is not.
func TestCheckerLongString(t *testing.T) {
	text := strings.Repeat("héllo wörld 😀 ", 20000)
	frame := []byte(`{"jsonrpc":"2.0","id":1,"result":{"text":"` + text + `"}}`)
	for _, size := range []int{1, 7, 4093, 64 << 10} {
		var pieces [][]byte
		for i := 0; i < len(frame); i += size {
			pieces = append(pieces, frame[i:min(i+size, len(frame))])
		}
		assert.True(t, checkPieces(pieces...), "pieces of %d", size)
	}
	bad := []byte(string(frame))
	bad[len(bad)/2] = 0xff
	assert.False(t, checkPieces(bad[:len(bad)/2], bad[len(bad)/2:]), "a 0xff in the middle")
}

func FuzzChecker(f *testing.F) {
	for _, in := range checkerCases {
		if len(in) < 1024 {
			f.Add([]byte(in), uint16(len(in)/2))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		i := int(cut) % (len(b) + 1)
		want := json.Valid(b) && utf8.Valid(b)
		if got := checkPieces(b[:i], b[i:]); got != want {
			t.Fatalf("checker(%q | %q) = %v, want %v", b[:i], b[i:], got, want)
		}
	})
}

// BenchmarkChecker10MB: the checker, fed a 10 MB answer of source-like
// text in the 256 KiB pieces a server's stdout is read in, against Valid
// over the whole.
func BenchmarkChecker10MB(b *testing.B) {
	const line = "func main() {\n\tfmt.Println(\"héllo, wörld\") // C:\\tmp\\x\n}\n"
	text, _ := json.Marshal(strings.Repeat(line, 10<<20/len(line)))
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + string(text) + `}]}}`)
	b.Run("Valid", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if !Valid(msg) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("checker", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var c checker
			for i := 0; i < len(msg); i += 256 << 10 {
				c.feed(msg[i:min(i+256<<10, len(msg))])
			}
			if !c.valid() {
				b.Fatal("invalid")
			}
		}
	})
}
