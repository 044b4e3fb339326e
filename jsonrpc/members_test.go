package jsonrpc

import (
	"encoding/json"
	"testing"
)

// TestUnquote: the fast path and the decoder agree, and what is no string
// is refused.
func TestUnquote(t *testing.T) {
	for _, raw := range []string{`"plain"`, `""`, `"caf\u00e9"`, `"a\"b"`, `"tab\there"`, `"ünï"`} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		got, ok := Unquote([]byte(raw))
		if !ok || got != want {
			t.Errorf("Unquote(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`1`, `{}`, `null`, `"`} {
		if _, ok := Unquote([]byte(raw)); ok {
			t.Errorf("Unquote(%s) took it as a string", raw)
		}
	}
}

// TestDropMembers: named members leave with their commas, wherever they
// sit, escaped keys included; the rest keep their order and spacing; the
// result is valid JSON, and the frame around the object is untouched.
func TestDropMembers(t *testing.T) {
	for _, c := range []struct{ obj, want string }{
		{` { "b" : 1, "drop":{"x":[1,2]}, "progressToken": "t", "a\u0062c":true, "dr\u006fp":0 } `, ` { "b" : 1, "progressToken": "t", "a\u0062c":true } `},
		{`{"drop":1}`, `{}`},
		{`{ "drop":1 , "drop":2 }`, `{  }`},
		{`{"drop":1,"other":2,"drop":3}`, `{"other":2}`},
		{`{"drop":1,"drop":[],"a":{"drop":1},"b":2}`, `{"a":{"drop":1},"b":2}`},
		{`{"a":1,"b":2}`, `{"a":1,"b":2}`},
		{`{}`, `{}`},
		{`{"a":1,"drop":"x,y}"}`, `{"a":1}`},
	} {
		frame := []byte(`{"id":1,"params":` + c.obj + `,"z":0}`)
		s := Span{Start: len(`{"id":1,"params":`), End: len(`{"id":1,"params":`) + len(c.obj)}
		var edits []Edit
		if c.obj == c.want {
			edits = append(edits, Edit{Span: Span{Start: 6, End: 7}, Value: []byte("2")}) // another edit passes through
		}
		edits = DropMembers(frame, s, []string{"drop"}, edits)
		got := Splice(frame, edits...)
		want := `{"id":1,"params":` + c.want + `,"z":0}`
		if c.obj == c.want {
			want = `{"id":2,"params":` + c.want + `,"z":0}`
		}
		if string(got) != want {
			t.Errorf("%s: got %s, want %s", c.obj, got, want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: %s is not valid JSON", c.obj, got)
		}
	}
}
