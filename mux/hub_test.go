package mux

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

func TestManySessionsOneInitialize(t *testing.T) {
	h := newHarness(t, nil)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			c := h.connect()
			c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
			frame, err := c.recvFrame()
			if assert.NoError(t, err) {
				assert.Contains(t, string(frame), `"protocolVersion":"2025-06-18"`)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, len(h.srv.messages("initialize")), "initialize requests the server saw")
}

func TestInitializeResultForSession(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct{ asked, want string }{
		{"2024-11-05", "2024-11-05"},
		{"2025-03-26", "2025-03-26"},
		{"2025-11-25", "2025-11-25"},
		{"2099-01-01", "2025-11-25"}, // unknown: the server's, the client decides
		{"", "2025-11-25"},
	}
	for _, tt := range tests {
		t.Run(tt.asked, func(t *testing.T) {
			c := h.connect()
			c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + tt.asked + `","capabilities":{}}}`)
			m := c.recv()
			var res struct {
				ProtocolVersion string                     `json:"protocolVersion"`
				Capabilities    map[string]json.RawMessage `json:"capabilities"`
			}
			require.NoError(t, json.Unmarshal(m.Result, &res))
			assert.Equal(t, tt.want, res.ProtocolVersion)
			assert.JSONEq(t, `{"listChanged":true}`, string(res.Capabilities["tools"]))
			assert.JSONEq(t, `{"listChanged":true}`, string(res.Capabilities["prompts"]))
			assert.JSONEq(t, `{"subscribe":true,"listChanged":true}`, string(res.Capabilities["resources"]))
			assert.JSONEq(t, `{"cancel":{}}`, string(res.Capabilities["tasks"]), "tasks.list is dropped")
		})
	}
}

func TestLifecycleErrors(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connect()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	code, reason := errorOf(t, c.recv())
	assert.Equal(t, []any{-32600, "not_initialized"}, []any{code, reason})

	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	assert.JSONEq(t, `{}`, string(c.recv().Result), "ping before initialize is answered")

	c.send(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	require.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	// A second initialize (FastMCP sends one on every re-entry) is
	// answered again from the cache, with the version asked for now.
	c.send(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}}}}`)
	m4 := c.recv()
	require.Equal(t, jsonrpc.KindResult, m4.Kind, "%s", m4.Frame)
	assert.Contains(t, string(m4.Result), `"protocolVersion":"2025-06-18"`)
	assert.Equal(t, "2025-06-18", h.Status().SessionList[0].Protocol)

	// server/discover is answered in any session, from the server's
	// description: a legacy server's, here, as a modern client sees it.
	c.send(`{"jsonrpc":"2.0","id":5,"method":"server/discover"}`)
	var disc struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		ResultType        string                     `json:"resultType"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	m5 := c.recv()
	require.NoError(t, json.Unmarshal(m5.Result, &disc), "discover: %s", m5.Frame)
	assert.Equal(t, []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, disc.SupportedVersions)
	assert.Equal(t, "complete", disc.ResultType)
	assert.JSONEq(t, `{"listChanged":true}`, string(disc.Capabilities["tools"]))
	assert.NotContains(t, disc.Capabilities, "tasks", "2025 tasks do not translate to 2026-07-28")
	assert.JSONEq(t, `{"name":"fake","version":"1"}`, string(disc.Meta["io.modelcontextprotocol/serverInfo"]))

	c.send(`{"jsonrpc":"2.0","id":6,"method":"hang"}`, `{"jsonrpc":"2.0","id":6,"method":"echo"}`)
	m := c.recv()
	code, reason = errorOf(t, m)
	assert.Equal(t, []any{-32600, "duplicate_id", "6"}, []any{code, reason, string(m.ID)})
	assert.Equal(t, 1, len(h.srv.messages("initialize")))
}

func TestPipelinedSessionsReuseIDs(t *testing.T) {
	h := newHarness(t, nil)
	const sessions, perSession = 32, 100
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			c := h.session("2025-11-25")
			id := func(i int) string {
				if i%2 == 0 {
					return fmt.Sprint(i) // every session uses the same ids
				}
				return fmt.Sprintf(`"%d"`, i)
			}
			var lines []string
			for i := range perSession {
				lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"echo","params":{"s":%d,"i":%d}}`, id(i), s, i))
			}
			go c.send(lines...)
			got := map[string]string{}
			for range perSession {
				frame, err := c.recvFrame()
				if !assert.NoError(t, err) {
					return
				}
				m, err := jsonrpc.Parse(frame)
				if !assert.NoError(t, err) {
					return
				}
				got[string(m.ID)] = string(m.Result)
			}
			want := map[string]string{}
			for i := range perSession {
				want[id(i)] = fmt.Sprintf(`{"params":{"s":%d,"i":%d}}`, s, i)
			}
			assert.Equal(t, want, got, "session %d", s)
		})
	}
	wg.Wait()
}

func TestIDsComeBackByteExact(t *testing.T) {
	h := newHarness(t, nil)
	c := h.session("2025-11-25")
	for _, id := range []string{`1`, `"1"`, `-5`, `0`, `9007199254740993`, `123456789012345678901234567890`, `""`, `"a\"b\\c"`, `"\u00e9"`, `"日本語"`, `"\ud83d\ude00"`} {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"echo"}`)
		m := c.recv()
		assert.Equal(t, id, string(m.ID), "id %s", id)
		assert.Equal(t, jsonrpc.KindResult, m.Kind, "id %s", id)
	}
	for _, id := range []string{`null`, `{}`, `[1]`, `true`, `1.5`, `1e3`} {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"echo"}`)
		code, reason := errorOf(t, c.recv())
		assert.Equal(t, []any{-32600, "invalid_request"}, []any{code, reason}, "id %s", id)
		c.send(`{"jsonrpc":"2.0","id":"after","method":"echo"}`)
		assert.Equal(t, `"after"`, string(c.recv().ID), "the session goes on after id %s", id)
	}
}

func TestProgressGoesToItsOwner(t *testing.T) {
	h := newHarness(t, nil)
	a, b := h.session("2025-11-25"), h.session("2025-11-25")
	for _, c := range []*testClient{a, b} {
		c.send(`{"jsonrpc":"2.0","id":1,"method":"progress","params":{"_meta":{"progressToken":"tok","other":1}}}`)
	}
	for name, c := range map[string]*testClient{"a": a, "b": b} {
		var progress []string
		for {
			m := c.recv()
			if m.Kind == jsonrpc.KindResult {
				break
			}
			progress = append(progress, string(m.Params))
		}
		assert.Equal(t, []string{
			`{"progressToken":"tok","progress":1,"total":3}`,
			`{"progressToken":"tok","progress":2,"total":3}`,
			`{"progressToken":"tok","progress":3,"total":3}`,
		}, progress, "session %s", name)
	}
	// The server saw two different tokens, and the other _meta members.
	var tokens []string
	for _, m := range h.srv.messages("progress") {
		assert.Contains(t, string(m.Params), `"other":1`)
		s, _ := m.ParamsPath("_meta", "progressToken")
		tokens = append(tokens, string(m.Frame[s.Start:s.End]))
	}
	require.Len(t, tokens, 2)
	assert.NotEqual(t, tokens[0], tokens[1])
}

func TestCancellation(t *testing.T) {
	h := newHarness(t, nil)
	a, b := h.session("2025-11-25"), h.session("2025-11-25")
	a.send(`{"jsonrpc":"2.0","id":7,"method":"hang"}`)
	eventually(t, "A's request upstream", func() bool { return len(h.srv.messages("hang")) == 1 })
	b.send(`{"jsonrpc":"2.0","id":7,"method":"hang"}`)
	eventually(t, "both requests upstream", func() bool { return len(h.srv.messages("hang")) == 2 })
	upOf := func(i int) string { return string(h.srv.messages("hang")[i].ID) }
	aUp, bUp := upOf(0), upOf(1)

	// A names B's upstream id, and an id nobody has: neither is forwarded.
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + bUp + `}}`)
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}`)
	// A cancels its own 7: the server sees the id it knows.
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	eventually(t, "the cancellation upstream", func() bool { return len(h.srv.messages("notifications/cancelled")) >= 1 })
	// A marker request proves the earlier notifications were handled.
	a.send(`{"jsonrpc":"2.0","id":"marker","method":"echo"}`)
	assert.Equal(t, `"marker"`, string(a.recv().ID), "A gets no answer to its cancelled request")
	cancels := h.srv.messages("notifications/cancelled")
	require.Len(t, cancels, 1)
	assert.JSONEq(t, `{"requestId":`+aUp+`,"reason":"user"}`, string(cancels[0].Params))

	// A may reuse 7 at once.
	a.send(`{"jsonrpc":"2.0","id":7,"method":"echo"}`)
	m := a.recv()
	assert.Equal(t, []any{"7", jsonrpc.KindResult}, []any{string(m.ID), m.Kind})
}

func TestDisconnectCancelsUpstream(t *testing.T) {
	h := newHarness(t, nil)
	c := h.session("2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"hang"}`)
	eventually(t, "the request upstream", func() bool { return len(h.srv.messages("hang")) == 1 })
	up := string(h.srv.messages("hang")[0].ID)
	start := time.Now()
	c.conn.Close()
	eventually(t, "a cancellation upstream", func() bool { return len(h.srv.messages("notifications/cancelled")) == 1 })
	t.Logf("cancelled upstream %v after the disconnect", time.Since(start))
	assert.Less(t, time.Since(start), time.Second)
	assert.JSONEq(t, `{"requestId":`+up+`,"reason":"client disconnected"}`, string(h.srv.messages("notifications/cancelled")[0].Params))
}

func TestCrashFailsInflightAndRestarts(t *testing.T) {
	h := newHarness(t, nil)
	c := h.session("2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":"a","method":"hang"}`)
	eventually(t, "the request upstream", func() bool { return len(h.srv.messages("hang")) == 1 })
	h.srv.current().crash("exited")
	m := c.recv()
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{`"a"`, -32603, "upstream_exited"}, []any{string(m.ID), code, reason})

	// The session stays; the server is back, with list_changed for its lists.
	got := map[string]bool{}
	for len(got) < 3 {
		got[c.recv().Method] = true
	}
	assert.Equal(t, map[string]bool{
		"notifications/tools/list_changed":     true,
		"notifications/prompts/list_changed":   true,
		"notifications/resources/list_changed": true,
	}, got)
	c.send(`{"jsonrpc":"2.0","id":"b","method":"echo"}`)
	assert.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	assert.Equal(t, 2, len(h.srv.messages("initialize")))
}

func TestServerRequestsAnsweredLocally(t *testing.T) {
	h := newHarness(t, nil)
	c := h.session("2025-11-25")
	p := h.srv.current()
	eventually(t, "ready", func() bool { return h.Status().State == StateReady })
	p.reply([]byte(`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`))
	p.reply([]byte(`{"jsonrpc":"2.0","id":"srv-2","method":"sampling/createMessage","params":{}}`))
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	assert.Equal(t, "notifications/tools/list_changed", c.recv().Method, "the session sees only the notification")
	// The answers went to the server; the fake records them as received.
	eventually(t, "two answers upstream", func() bool {
		return h.srv.count(func(m *jsonrpc.Message) bool { return m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError }) == 2
	})
}

// Status is exposed for tests through the harness.
func (h *harness) Status() Status { return h.hub.Status() }

func TestBatches(t *testing.T) {
	h := newHarness(t, nil)
	old := h.session("2025-03-26")
	old.send(`[{"jsonrpc":"2.0","id":1,"method":"echo","params":{"n":1}},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"initialize"},{"bad":1}]`)
	frame, err := old.recvFrame()
	require.NoError(t, err)
	var answers []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(frame, &answers), "one array: %s", frame)
	ids := map[string]bool{}
	for _, a := range answers {
		ids[string(a["id"])] = true
	}
	assert.Equal(t, map[string]bool{"1": true, "2": true, "3": true, "null": true}, ids)

	cur := h.session("2025-11-25")
	cur.send(`[{"jsonrpc":"2.0","id":1,"method":"echo"}]`)
	code, reason := errorOf(t, cur.recv())
	assert.Equal(t, []any{-32600, "batch_not_supported"}, []any{code, reason})
}

func TestMalformedFramesNeverReachTheServer(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Upstream.MaxMessageBytes = 64 << 10 })
	c := h.session("2025-11-25")
	before := h.srv.count(func(*jsonrpc.Message) bool { return true })
	cases := []struct {
		name, frame string
		code        int
		reason      string // "" when no answer is due
	}{
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"echo"`, -32700, "parse_error"},
		{"not json", `hello`, -32700, "parse_error"},
		{"invalid utf-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"e\xffcho\"}", -32700, "parse_error"},
		{"nul byte", "{\"jsonrpc\":\"2.0\",\"id\":1,\x00\"method\":\"echo\"}", -32700, "parse_error"},
		{"bare number", `42`, -32600, "invalid_request"},
		{"bare string", `"x"`, -32600, "invalid_request"},
		{"bare null", `null`, -32600, "invalid_request"},
		{"bare true", `true`, -32600, "invalid_request"},
		{"empty batch", `[]`, -32600, "batch_not_supported"},
		{"junk batch", `[1,2,3]`, -32600, "batch_not_supported"},
		{"empty object", `{}`, -32600, "invalid_request"},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"echo"}`, -32600, "invalid_request"},
		{"numeric jsonrpc", `{"jsonrpc":2,"id":1,"method":"echo"}`, -32600, "invalid_request"},
		{"no jsonrpc", `{"id":1,"method":"echo"}`, -32600, "invalid_request"},
		{"missing method", `{"jsonrpc":"2.0","id":1}`, -32600, "invalid_request"},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":5}`, -32600, "invalid_request"},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"echo","params":"x"}`, -32600, "invalid_request"},
		{"params null", `{"jsonrpc":"2.0","id":1,"method":"echo","params":null}`, -32600, "invalid_request"},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"echo"}`, -32600, "invalid_request"},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"echo"}`, -32600, "invalid_request"},
		{"id bool", `{"jsonrpc":"2.0","id":false,"method":"echo"}`, -32600, "invalid_request"},
		{"id float", `{"jsonrpc":"2.0","id":2.5,"method":"echo"}`, -32600, "invalid_request"},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"echo"}`, -32600, "invalid_request"},
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"echo","method":"hang"}`, -32600, "invalid_request"},
		{"case variant ID", `{"jsonrpc":"2.0","ID":1,"method":"echo"}`, -32600, "invalid_request"},
		{"case variant Method", `{"jsonrpc":"2.0","id":1,"Method":"echo","method":"echo"}`, -32600, "invalid_request"},
		{"escaped id twice", `{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"echo"}`, -32600, "invalid_request"},
		{"result and method", `{"jsonrpc":"2.0","id":1,"method":"echo","result":{}}`, -32600, "invalid_request"},
		{"deep nesting", `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`, -32700, "parse_error"},
		{"oversized", `{"jsonrpc":"2.0","method":"echo","params":{"x":"` + strings.Repeat("y", 100<<10) + `"},"id":99}`, -32600, "message_too_large"},
		{"response to nothing", `{"jsonrpc":"2.0","id":77,"result":{}}`, 0, ""},
		{"error to nothing", `{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}`, 0, ""},
		{"cancel unknown id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":424242}}`, 0, ""},
		{"cancel without id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, 0, ""},
	}
	for i, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			marker := fmt.Sprintf(`"ok-%d"`, i)
			c.send(tt.frame, `{"jsonrpc":"2.0","id":`+marker+`,"method":"ping"}`)
			m := c.recv()
			if tt.reason != "" {
				code, reason := errorOf(t, m)
				assert.Equal(t, []any{tt.code, tt.reason}, []any{code, reason}, "answer to %.80s", tt.frame)
				m = c.recv()
			}
			assert.Equal(t, marker, string(m.ID), "the valid request after %q is answered", tt.name)
		})
	}
	// ping is answered locally, so nothing at all reached the server.
	assert.Equal(t, before, h.srv.count(func(*jsonrpc.Message) bool { return true }))
}

// A panic inside the hub's handling of one message, here inside the
// critical section of the subscription table, is that message's failure
// alone: the session gets an internal error for it and reads on, and every
// other session of the server is served, through that very table too.
func TestPanicInHubHandlingLeavesTheOthersServed(t *testing.T) {
	var armed atomic.Bool
	h := newHarness(t, func(c *Config) {
		c.hook = func() {
			if armed.CompareAndSwap(true, false) {
				panic("injected")
			}
		}
	})
	a, b := h.session("2025-11-25"), h.session("2025-11-25")
	armed.Store(true)
	a.send(`{"jsonrpc":"2.0","id":"boom","method":"resources/subscribe","params":{"uri":"file:///x"}}`)
	m := a.recv()
	assert.Equal(t, `"boom"`, string(m.ID))
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{-32603, "internal_error"}, []any{code, reason})

	b.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"file:///x"}}`)
	m = b.recv()
	assert.Equal(t, jsonrpc.KindResult, m.Kind, "B's subscribe after the panic: %s", m.Frame)
	for _, cl := range []*testClient{a, b, h.session("2025-11-25")} {
		cl.send(`{"jsonrpc":"2.0","id":7,"method":"echo","params":{"n":1}}`)
		m := cl.answer()
		assert.Equal(t, `7`, string(m.ID))
		assert.JSONEq(t, `{"params":{"n":1}}`, string(m.Result))
	}
}

// mcpmux declares to the server only what every SDK accepts (a strict
// server refuses sub-fields it does not know), roots only when it has roots
// to answer with, and exactly the configured upstream_capabilities when set.
func TestUpstreamCapabilities(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(*Config)
		want  string
	}{
		{"default", nil, `{"sampling":{},"elicitation":{}}`},
		{"roots configured", func(c *Config) { c.Roots = []string{"file:///w"} }, `{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}`},
		{"as written", func(c *Config) {
			c.UpstreamCapabilities = json.RawMessage(`{"sampling":{"tools":{}},"experimental":{"x":1}}`)
		}, `{"sampling":{"tools":{}},"experimental":{"x":1}}`},
		{"as written, with the configured roots", func(c *Config) {
			c.UpstreamCapabilities = json.RawMessage(`{"elicitation":{"url":{}}}`)
			c.RootsFromSessions = true
		}, `{"elicitation":{"url":{}},"roots":{"listChanged":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.tweak)
			eventually(t, "initialize", func() bool { return len(h.srv.messages("initialize")) == 1 })
			var p struct {
				Capabilities json.RawMessage `json:"capabilities"`
			}
			require.NoError(t, json.Unmarshal(h.srv.messages("initialize")[0].Params, &p))
			assert.JSONEq(t, tt.want, string(p.Capabilities))
		})
	}
}
