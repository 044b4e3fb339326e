package streamable

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// FuzzClassify feeds the POST classification any body and headers: the
// body is read within its limit or refused, and a POST on an
// Mcp-Session-Id is never taken for the 2026-07-28 binding.
func FuzzClassify(f *testing.F) {
	for _, s := range []struct{ body, session, version string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "abc", "2026-07-28"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]`, "", "2025-06-18"},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, "", ""},
		{"\xff", "", ""},
		{``, "", ""},
	} {
		f.Add([]byte(s.body), s.session, s.version)
	}
	const limit = 1 << 12
	f.Fuzz(func(t *testing.T, raw []byte, session, version string) {
		r := httptest.NewRequest("POST", "/servers/x", bytes.NewReader(raw))
		if session != "" {
			r.Header.Set(headerSessionID, session)
		}
		if version != "" {
			r.Header.Set(headerProtocolVersion, version)
		}
		if r.Header.Get(headerSessionID) == "" && session != "" {
			return // not a header value net/http keeps
		}
		b, refused := readBody(r, limit)
		if refused != nil {
			if refused.err == nil || refused.status < 400 {
				t.Fatalf("a refusal without an error or a 4xx: %+v", refused)
			}
			return
		}
		if len(b.frame) > limit || !jsonrpc.Valid(b.frame) {
			t.Fatalf("accepted a body that is over the limit or not JSON: %q", b.frame)
		}
		if !b.batch && b.msg == nil {
			t.Fatal("a single message with no parse")
		}
		if isModernPOST(r, b) && r.Header.Get(headerSessionID) != "" {
			t.Fatal("a POST on a session taken for the 2026-07-28 binding")
		}
	})
}
