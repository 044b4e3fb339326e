package mux

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/session"
)

// TestModernRootsUnderSessions: with roots = "sessions", a modern session
// that declares roots is asked for them once, as input_required on its
// first call, and its retry goes on without mcpmux's input; a legacy
// server's roots/list then gets them, while the session lasts. A client
// over HTTP, whose requests are sessions of their own, is asked once too:
// its roots are served while one of its requests is, and given again to
// its next request without asking. A session that says its roots changed
// is asked again. When they have all left, the server's
// roots/list gets none.
func TestModernRootsUnderSessions(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RootsFromSessions = true })
	caps := `{"roots":{}}`
	call := func(c *testClient, id, extra string) string {
		t.Helper()
		c.send(modern(id, "tools/call", `{"name":"roots"`+extra+`}`, "M", caps))
		m := c.recv()
		require.Equal(t, id, string(m.ID), "%s", m.Frame)
		require.Nil(t, m.Error, "%s", m.Frame)
		return string(m.Result)
	}
	retry := func(uri string) string {
		return `,"inputResponses":{"mcpmux-roots":{"roots":[{"uri":"` + uri + `"}]}},"requestState":"mcpmux-roots.1"`
	}
	asked := `{"inputRequests":{"mcpmux-roots":{"method":"roots/list","params":{}}},"requestState":"mcpmux-roots.1","resultType":"input_required"}`

	a := h.connect()
	assert.JSONEq(t, asked, call(a, `"1"`, ""), "asked for its roots")
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///a"}]},"resultType":"complete"}`, call(a, `"2"`, retry("file:///a")))
	last := h.srv.messages("tools/call")
	assert.NotContains(t, string(last[len(last)-1].Params), "mcpmux-roots", "the server gets the call without mcpmux's input")
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///a"}]},"resultType":"complete"}`, call(a, `"3"`, ""), "not asked again")
	a.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	assert.JSONEq(t, asked, call(a, `"3a"`, ""), "asked again once it said its roots changed")
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///a"}]},"resultType":"complete"}`, call(a, `"3b"`, retry("file:///a")))

	// A request of client x over HTTP: a session of its own, ended with it.
	callAsX := func(id, extra string) string {
		t.Helper()
		c := h.pipe(func(conn net.Conn) {
			h.hub.Serve(h.ctx, session.NewStream(conn, h.hub.MaxMessageBytes()), session.Peer{Transport: "http", OneRequest: true, Client: "x"})
		})
		defer c.conn.Close()
		return call(c, id, extra)
	}
	assert.JSONEq(t, asked, callAsX(`"4"`, ""))
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///a"},{"uri":"file:///x"}]},"resultType":"complete"}`, callAsX(`"5"`, retry("file:///x")), "the union")
	assert.JSONEq(t, `{"answer":{"roots":[{"uri":"file:///a"},{"uri":"file:///x"}]},"resultType":"complete"}`, callAsX(`"6"`, ""), "the client's roots, not asked again")

	a.conn.Close()
	eventually(t, "every session gone", func() bool { return len(h.hub.sessions.all()) == 0 })
	legacy := h.session("2025-11-25")
	legacy.send(`{"jsonrpc":"2.0","id":"l","method":"tools/call","params":{"name":"roots"}}`)
	m := legacy.recv()
	require.Equal(t, `"l"`, string(m.ID), "%s", m.Frame)
	assert.JSONEq(t, `{"answer":{"roots":[]}}`, string(m.Result), "the roots left with their clients")
}
