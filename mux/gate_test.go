package mux

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// heldCalls lists the "held" calls the server received, as (session label)
// from each call's arguments, in the order they arrived.
func heldCalls(f *fakeServer) []string {
	var out []string
	for _, m := range f.messages("tools/call") {
		var p struct {
			Name string `json:"name"`
			Args struct {
				From string `json:"from"`
			} `json:"arguments"`
		}
		json.Unmarshal(m.Params, &p)
		if p.Name == "held" {
			out = append(out, p.Args.From)
		}
	}
	return out
}

func heldCall(id, from string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"held","arguments":{"from":"` + from + `"}}}`
}

// With max_concurrency = 1, the server has one request in flight at a time;
// the others wait, the sessions taking turns (A's backlog does not go
// before B's one call), and each is answered.
func TestMaxConcurrency(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxConcurrency = 1 })
	a, b, c, d := h.session("2025-11-25"), h.session("2025-11-25"), h.session("2025-11-25"), h.session("2025-11-25")
	a.send(heldCall(`1`, "A"), heldCall(`2`, "A"), heldCall(`3`, "A"))
	eventually(t, "A's first call at the server", func() bool { return len(heldCalls(h.srv)) == 1 })
	for name, cl := range map[string]*testClient{"B": b, "C": c, "D": d} {
		cl.send(heldCall(`1`, name))
	}
	// Every request is in: the gate holds them. Nothing reaches the server
	// until the call there is answered.
	eventually(t, "all six in flight", func() bool { return h.Status().Inflight == 6 })
	var order []string
	for len(order) < 5 {
		n, _ := h.srv.heldNow()
		require.Equal(t, 1, n, "one call at the server at a time")
		require.True(t, h.srv.releaseHeld())
		eventually(t, "the next call at the server", func() bool { return len(heldCalls(h.srv)) == len(order)+2 })
		order = heldCalls(h.srv)[1:]
	}
	require.True(t, h.srv.releaseHeld())
	_, most := h.srv.heldNow()
	assert.Equal(t, 1, most, "the most calls the server had at once")
	assert.Equal(t, "A", heldCalls(h.srv)[0])
	first3 := map[string]bool{}
	for _, from := range order[:3] {
		first3[from] = true
	}
	assert.Equal(t, map[string]bool{"B": true, "C": true, "D": true}, first3, "the other sessions before A's second call: %v", order)
	for name, cl := range map[string]*testClient{"A": a, "B": b, "C": c, "D": d} {
		want := map[string]int{"A": 3}[name]
		if want == 0 {
			want = 1
		}
		for range want {
			m := cl.answer()
			assert.JSONEq(t, `{"held":true}`, string(m.Result), "%s: %s", name, m.Frame)
		}
	}
}

// A request cancelled while it waits at the gate leaves the queue: the
// server never hears of it, neither the request nor a cancellation, and
// request_timeout counts from when a request is sent.
func TestGateCancelAndTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxConcurrency = 1
		c.RequestTimeout = 300 * time.Millisecond
	})
	a := h.session("2025-11-25")
	a.send(heldCall(`1`, "A"), heldCall(`2`, "A"))
	eventually(t, "both in flight", func() bool { return h.Status().Inflight == 2 })
	a.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	eventually(t, "the waiting one gone", func() bool { return h.Status().Inflight == 1 })
	// The first times out at the server: cancelled there, and answered
	// with "timeout"; the second, never sent, leaves no trace.
	m := a.answer()
	assert.Equal(t, `1`, string(m.ID))
	_, reason := errorOf(t, m)
	assert.Equal(t, "timeout", reason)
	assert.Equal(t, []string{"A"}, heldCalls(h.srv))
	// The answer may reach the session before the cancellation, written
	// to the server's stdin, reaches the server.
	eventually(t, "the timed-out call's cancellation at the server", func() bool {
		return len(h.srv.messages("notifications/cancelled")) > 0
	})
	quiet(t, a, "no answer to the cancelled call")
	cancels := h.srv.messages("notifications/cancelled")
	require.Len(t, cancels, 1, "the timed-out call's cancellation only")
	assert.JSONEq(t, fmt.Sprintf(`{"requestId":%s,"reason":"timeout"}`, h.srv.messages("tools/call")[0].ID), string(cancels[0].Params))
	assert.Equal(t, jsonrpc.KindNotification, cancels[0].Kind)
}
