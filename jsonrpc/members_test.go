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

// TestFilterMembers: named members leave, one is replaced, the rest keep
// their order, escaped keys included.
func TestFilterMembers(t *testing.T) {
	obj := []byte(` { "b" : 1, "drop":{"x":[1,2]}, "progressToken": "t", "a\u0062c":true, "dr\u006fp":0 } `)
	got := FilterMembers(obj, []string{"drop"}, "progressToken", []byte(`42`))
	want := `{"b":1,"progressToken":42,"a\u0062c":true}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := FilterMembers([]byte(`{"drop":1}`), []string{"drop"}, "", nil); string(got) != `{}` {
		t.Errorf("all dropped: got %s", got)
	}
	if got := FilterMembers([]byte(`{"progressToken":"t"}`), nil, "progressToken", nil); string(got) != `{"progressToken":"t"}` {
		t.Errorf("nil value replaces nothing: got %s", got)
	}
	if FilterMembers([]byte(`[1]`), nil, "", nil) != nil {
		t.Error("an array is not an object")
	}
}
