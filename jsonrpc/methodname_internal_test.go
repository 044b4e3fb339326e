package jsonrpc

import "testing"

// A common method's name costs no allocation, and every name, common or
// not, comes back as it was.
func TestMethodName(t *testing.T) {
	for _, name := range []string{"tools/call", "ping", "notifications/progress", "x/custom", ""} {
		b := []byte(name)
		if got := methodName(b); got != name {
			t.Fatalf("methodName(%q) = %q", name, got)
		}
	}
	b := []byte("tools/call")
	if n := testing.AllocsPerRun(100, func() { _ = methodName(b) }); n != 0 {
		t.Fatalf("methodName(tools/call) allocates %v times", n)
	}
	m, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`))
	if err != nil || m.Method != "tools/call" {
		t.Fatalf("Parse: %v %q", err, m.Method)
	}
}
