package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// validCases are inputs on which valid must agree with encoding/json.
var validCases = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `{"a":}`, `{,}`, `[,1]`,
	`"x"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"a\"b"`, `"\\"`, `"tab	in"`, "\"nl\nin\"", `"\/"`, `"\ud83d\ude00"`,
	`0`, `-0`, `01`, `-`, `1.`, `.5`, `1.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e10`, `2.`, `+1`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `nulll`, `[true,false,null]`,
	` {"a" : [ 1 , 2 ] } `, `{"a":{"b":{"c":[]}}}`, `{"a":1}{}`, `[][]`, `{"a":"b"`, `[1,2`, `"abc`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"progressToken":"t"}}}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range validCases {
		assert.Equal(t, json.Valid([]byte(in)), valid([]byte(in)), "valid(%.60q)", in)
	}
}

func FuzzValid(f *testing.F) {
	for _, in := range validCases {
		if len(in) < 1024 {
			f.Add([]byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := valid(b), json.Valid(b); got != want {
			t.Fatalf("valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValid10MB(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 10<<20) + `"}]}}`)
	b.Run("valid", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			valid(msg)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			json.Valid(msg)
		}
	})
}
