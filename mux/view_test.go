package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// TestToolViewVisible checks which tools a view shows: allow only, deny
// only, both (deny wins), and the globs.
func TestToolViewVisible(t *testing.T) {
	tools := []string{"read_file", "read_dir", "write_file", "delete", "search", "", "réad_x"}
	tests := []struct {
		name string
		view ToolView
		want []string // the visible tools, in the order of tools
	}{
		{"zero value shows all", ToolView{}, tools},
		{"allow only", ToolView{Allow: []string{"read_*", "search"}}, []string{"read_file", "read_dir", "search"}},
		{"deny only", ToolView{Deny: []string{"delete", "write_*"}}, []string{"read_file", "read_dir", "search", "", "réad_x"}},
		{"both: deny wins", ToolView{Allow: []string{"read_*", "write_*"}, Deny: []string{"*_dir", "write*"}}, []string{"read_file"}},
		{"? is one character, a rune", ToolView{Allow: []string{"r?ad_*"}}, []string{"read_file", "read_dir", "réad_x"}},
		{"* matches none too", ToolView{Allow: []string{"search*", "*delete*"}}, []string{"delete", "search"}},
		{"a glob matches whole names", ToolView{Allow: []string{"read"}}, nil},
		{"star alone", ToolView{Allow: []string{"*"}, Deny: []string{"*e*"}}, []string{"", "réad_x"}}, // é is not e
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, name := range tools {
				if tt.view.Visible(name) {
					got = append(got, name)
				}
			}
			assert.Equal(t, tt.want, got, "view %+v", tt.view)
		})
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"*_file", "read_file_file", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"**x", "yx", true},
		{"fs__*", "fs__read", true},
		{"fs__*", "git__read", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, glob(tt.pattern, tt.name), "glob(%q, %q)", tt.pattern, tt.name)
	}
}

// TestToolViewFilter checks a tools/list result as a session gets it:
// the hidden tools gone, every other member kept.
func TestToolViewFilter(t *testing.T) {
	v := ToolView{Deny: []string{"secret*"}}
	result := `{"tools":[{"name":"echo","inputSchema":{}},{"name":"secret_a"},{"name":"secret_b"}],"nextCursor":"2","_meta":{"k":1}}`
	out, ok := v.filter(json.RawMessage(result))
	require.True(t, ok)
	assert.JSONEq(t, `{"tools":[{"name":"echo","inputSchema":{}}],"nextCursor":"2","_meta":{"k":1}}`, string(out))

	out, ok = v.filter(json.RawMessage(`{"tools":[{"name":"secret"}]}`))
	require.True(t, ok)
	assert.JSONEq(t, `{"tools":[]}`, string(out), "all hidden: an empty list, not null")

	for _, unchanged := range []string{`{"tools":[{"name":"echo"}]}`, `{"tools":7}`, `[]`, ``} {
		_, ok := v.filter(json.RawMessage(unchanged))
		assert.False(t, ok, "%s", unchanged)
	}
	assert.Equal(t, result, string(ToolView{}.filterResult("tools/list", json.RawMessage(result))), "no view: the server's bytes")
	assert.Equal(t, `{"tools":[{"name":"secret"}]}`, string(v.filterResult("prompts/list", json.RawMessage(`{"tools":[{"name":"secret"}]}`))), "tools/list only")
}

// A server's view: a session's tools/list lacks the hidden tools, a call
// to one is refused -32602 unknown_tool and never reaches the server, in
// both eras; a visible tool is called as usual.
func TestToolViewOfAServer(t *testing.T) {
	srv := newFakeServer()
	srv.lists = map[string]string{"tools/list": `{"tools":[{"name":"echo"},{"name":"secret_x"},{"name":"progress"}]}`}
	h := newHarnessOn(t, srv, func(c *Config) {
		c.Protocol = ProtocolLegacy
		c.Tools = ToolView{Allow: []string{"echo", "secret_*"}, Deny: []string{"secret*"}}
	})
	c := h.session("2025-11-25")
	c.send(listTools)
	assert.JSONEq(t, `{"tools":[{"name":"echo"}]}`, string(c.answer().Result))

	c.send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"secret_x","arguments":{}}}`)
	m := c.answer()
	code, reason := errorOf(t, m)
	assert.Equal(t, []any{jsonrpc.CodeInvalidParams, "unknown_tool"}, []any{code, reason})
	assert.Contains(t, string(m.Error), `unknown tool \"secret_x\"`)
	c.send(`{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"progress"}}`)
	code, reason = errorOf(t, c.answer())
	assert.Equal(t, []any{jsonrpc.CodeInvalidParams, "unknown_tool"}, []any{code, reason}, "not allowed: hidden too")

	m2 := h.connect()
	m2.send(modern(`"m"`, "tools/call", `{"name":"secret_x"}`, "M", `{}`))
	code, reason = errorOf(t, m2.answer())
	assert.Equal(t, []any{jsonrpc.CodeInvalidParams, "unknown_tool"}, []any{code, reason}, "2026-07-28 too")
	m2.send(modern(`"l"`, "tools/list", "", "M", `{}`))
	assert.Contains(t, string(m2.answer().Result), `"tools":[{"name":"echo"}]`, "2026-07-28 list")

	c.send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, jsonrpc.KindResult, c.answer().Kind)
	assert.Len(t, srv.messages("tools/call"), 1, "the server saw the visible call only")
}

// A view applies to the lists answered from memory while the server
// starts, and what is kept is the server's whole list: a view that
// changes needs nothing forgotten.
func TestToolViewOfListsFromMemory(t *testing.T) {
	mem := &fakeListMemory{fakeMemory: new(fakeMemory)}
	whole := `{"tools":[{"name":"a"},{"name":"b"}]}`
	srv := newFakeServer()
	srv.lists = map[string]string{"tools/list": whole}
	hide := func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy; c.Tools = ToolView{Deny: []string{"b"}} }
	h := newHarnessOn(t, srv, hide)
	c := h.session("2025-11-25")
	c.send(listTools)
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, string(c.answer().Result))
	eventually(t, "the list kept", func() bool { _, w := mem.list(""); return w == 1 })
	eventually(t, "the description kept", func() bool { _, raw := mem.Description(); return raw != nil })
	kept, _ := mem.list("tools/list")
	assert.JSONEq(t, whole, kept, "kept as the server said it")

	srv = newFakeServer()
	srv.initGate = make(chan struct{})
	h = newHarnessOn(t, srv, hide)
	c = h.session("2025-11-25")
	c.send(listTools)
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, string(c.answer().Result), "from memory, through the view")
	assert.Equal(t, StateStarting, h.Status().State)
	close(srv.initGate)
}

// A list whose "result" comes before its "id" (the TypeScript SDK writes
// them so), answered under a session id shorter than mcpmux's: the session
// and the list kept both get the server's list intact, with a view and
// without one.
func TestListKeptWhenResultComesFirst(t *testing.T) {
	for _, view := range []ToolView{{}, {Deny: []string{"b"}}} {
		t.Run(fmt.Sprintf("view %+v", view), func(t *testing.T) {
			mem := &fakeListMemory{fakeMemory: new(fakeMemory)}
			whole := `{"tools":[{"name":"a"},{"name":"b"}]}`
			srv := newFakeServer()
			srv.lists, srv.listFirst = map[string]string{"tools/list": whole}, true
			h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy; c.Tools = view })
			c := h.session("2025-11-25")
			for i := range 12 { // mcpmux's ids reach two digits
				c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"e%d","method":"tools/call","params":{"name":"echo"}}`, i))
				c.answer()
			}
			c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			m := c.answer()
			require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
			want, _ := view.filter(json.RawMessage(whole))
			if want == nil {
				want = json.RawMessage(whole)
			}
			assert.JSONEq(t, string(want), string(m.Result), "the session's answer")
			eventually(t, "the list kept", func() bool { _, w := mem.list(""); return w == 1 })
			kept, _ := mem.list("tools/list")
			assert.JSONEq(t, whole, kept, "the list kept")
		})
	}
}

// A pool's SetTools reaches the process of a session already running and
// the processes of sessions to come.
func TestPoolSetTools(t *testing.T) {
	srv := newFakeServer()
	pool := NewPool(Config{Name: "iso", Upstream: upstream.Config{MaxMessageBytes: 1 << 20}, start: srv.start, IDs: new(atomic.Uint64)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { pool.Run(ctx) })
	h := &harness{t: t, srv: srv, ctx: ctx}
	defer h.wg.Wait()
	defer cancel()
	attach := func() *testClient {
		c := h.pipe(func(conn net.Conn) {
			pool.Serve(ctx, session.NewStream(conn, 1<<20), session.Peer{Transport: "test"})
		})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		require.Equal(t, jsonrpc.KindResult, c.recv().Kind)
		return c
	}
	call := `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"echo"}}`
	a := attach()
	a.send(call)
	require.Equal(t, jsonrpc.KindResult, a.answer().Kind, "visible at first")

	pool.SetTools(ToolView{Deny: []string{"echo"}})
	assert.Equal(t, "notifications/tools/list_changed", a.recv().Method, "the running session is told")
	for name, c := range map[string]*testClient{"running": a, "new": attach()} {
		c.send(call)
		code, reason := errorOf(t, c.answer())
		assert.Equal(t, []any{jsonrpc.CodeInvalidParams, "unknown_tool"}, []any{code, reason}, name)
	}
	assert.Len(t, srv.messages("tools/call"), 1, "the hidden calls never reached a process")
}
