package streamable

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
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

// FuzzDecodeRecord feeds a session record's decode any file contents: a
// record it accepts is the session's own, carries an initialize message
// and an absolute folder if any, and reads back the same once saved.
func FuzzDecodeRecord(f *testing.F) {
	const id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`
	for _, s := range []string{
		`{"id":"` + id + `","server":"s","initialize":` + init + `}`,
		`{"id":"` + id + `","server":"s","initialize":` + init + `,"initialized":true,"level":{"level":"debug"},"subscriptions":{"file:///a":{"uri":"file:///a"}},"folder":"/tmp"}`,
		`{"id":"` + id + `","initialize":` + init + `,"folder":"rel/dir"}`,
		`{"id":"` + id + `","initialize":null}`,
		`{"id":"` + id + `","initialize":{"jsonrpc":"2.0","method":"notifications/initialized"}}`,
		`{"id":"OTHER","initialize":` + init + `}`,
		`{"id":"` + id + `","initialize":` + init + `,"subscriptions":[]}`,
		`[]`, `null`, ``, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := decodeRecord(b, id)
		if !ok {
			if r != nil {
				t.Fatal("a refused record with a value")
			}
			return
		}
		if r.ID != id {
			t.Fatalf("accepted another session's record: %q", r.ID)
		}
		if len(r.Initialize) == 0 || r.Initialize[0] != '{' {
			t.Fatalf("accepted a record whose initialize is %q", r.Initialize)
		}
		if r.Folder != "" && !filepath.IsAbs(r.Folder) {
			t.Fatalf("accepted a relative folder %q", r.Folder)
		}
		saved, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("an accepted record does not encode: %v", err)
		}
		again, ok := decodeRecord(saved, id)
		if !ok {
			t.Fatalf("a saved record does not load: %s", saved)
		}
		if resaved, _ := json.Marshal(again); !bytes.Equal(resaved, saved) {
			t.Fatalf("a record changes when saved again:\n%s\n%s", saved, resaved)
		}
	})
}
