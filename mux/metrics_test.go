package mux

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/metrics"
)

// scrapeText is the registry's text format.
func scrapeText(reg *metrics.Registry) string {
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestMetricsCountEachEnd: each way a request ends is counted once under
// its outcome: answered, timed out, cancelled by its client, left in
// flight by a session that went, refused before initialize.
func TestMetricsCountEachEnd(t *testing.T) {
	reg := metrics.New()
	h := newHarness(t, func(c *Config) {
		c.RequestTimeout = 200 * time.Millisecond
		c.Metrics = reg.Server(c.Name)
	})
	c := h.session("2025-11-25")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	assert.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hang"}}`)
	_, reason := errorOf(t, c.recv())
	assert.Equal(t, "timeout", reason)
	c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"hang"}}`)
	eventually(t, "the call is at the server", func() bool { return len(h.srv.messages("tools/call")) == 4 })
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`)
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hang"}}`)
	eventually(t, "the last call is at the server", func() bool { return len(h.srv.messages("tools/call")) == 5 })
	c.conn.Close() // leaves it in flight

	fresh := h.connect()
	fresh.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	_, reason = errorOf(t, fresh.recv())
	assert.Equal(t, "not_initialized", reason)

	want := []string{
		`mcpmux_requests_total{method="tools/call",outcome="ok",server="fake"} 2`,
		`mcpmux_requests_total{method="tools/call",outcome="timeout",server="fake"} 1`,
		`mcpmux_requests_total{method="tools/call",outcome="cancelled",server="fake"} 2`,
		`mcpmux_requests_total{method="tools/list",outcome="refused",server="fake"} 1`,
		`mcpmux_request_duration_seconds_count{method="tools/call",server="fake"} 5`,
	}
	var text string // polled until the departed session's call is counted
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if text = scrapeText(reg); containsAll(text, want) {
			break
		}
	}
	for _, w := range want {
		assert.Contains(t, text, w)
	}
	if t.Failed() {
		t.Log(text)
	}
}

func containsAll(text string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}
