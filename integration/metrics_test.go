package integration

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// scrape is one parse of GET /metrics.
type scrape map[string]*dto.MetricFamily

// value is the value of the series of family name whose labels include
// want (a counter's, a gauge's, or a histogram's sample count); 0 when
// there is none.
func (s scrape) value(name string, want map[string]string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, want) {
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// getMetrics fetches and parses GET /metrics with client c at url; the
// status is returned when it is not 200.
func getMetrics(tb testing.TB, c *http.Client, url, token string) (scrape, int) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(tb, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(tb, err, "GET %s", url)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, resp.StatusCode
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(tb, err, "the client_golang text parser reads GET %s", url)
	return fams, resp.StatusCode
}

// controlClient speaks HTTP over the daemon's control socket.
func controlClient(d *daemon) *http.Client {
	path := filepath.Join(d.sockets, ".control.sock")
	return &http.Client{Timeout: ioTimeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", path)
		},
	}}
}

// TestMetricsCountTheCallsMade: GET /metrics, on the control endpoint and
// on the web listener behind the token, counts each request by method and
// outcome: answered, timed out, cancelled by the client, refused before
// initialize.
func TestMetricsCountTheCallsMade(t *testing.T) {
	d := startDaemon(t, demo("demo", nil, `request_timeout = "300ms"`), wsListen+"\nmetrics = true")
	ctl := controlClient(d)

	c := dial(t, d.socket("demo"))
	_, err := c.initialize("2025-06-18")
	require.NoError(t, err)
	for _, id := range []string{`1`, `2`, `3`} {
		m, err := c.tool(id, "echo", map[string]any{"text": "hi"})
		require.NoError(t, err)
		require.Equal(t, jsonrpc.KindResult, m.Kind, "echo %s", id)
	}
	m, err := c.call(`4`, "tools/list", nil)
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "tools/list")
	m, err = c.tool(`5`, "nope", nil)
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindError, m.Kind, "the server's error for an unknown tool")

	// One that outlives request_timeout.
	m, err = c.tool(`"late"`, "slow", map[string]any{"ms": 600000})
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindError, m.Kind, "the slow call times out: %s", m.Frame)

	// One the client cancels.
	require.NoError(t, c.send(request(`"gone"`, "tools/call", toolParams("slow", map[string]any{"ms": 600000}))))
	demoTools := map[string]string{"server": "demo", "method": "tools/call"}
	testutil.Eventually(t, readyTimeout, "the slow call is in flight", func() (bool, error) {
		s, _ := getMetrics(t, ctl, "http://mcpmux/metrics", "")
		return s.value("mcpmux_requests_in_flight", map[string]string{"server": "demo"}) == 1, nil
	})
	require.NoError(t, c.send(notification("notifications/cancelled", map[string]any{"requestId": "gone"})))

	// One refused: a request before initialize, on a second session.
	c2 := dial(t, d.socket("demo"))
	m, err = c2.call(`1`, "tools/list", nil)
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindError, m.Kind)

	var s scrape
	testutil.Eventually(t, readyTimeout, "the cancelled call is counted", func() (bool, error) {
		s, _ = getMetrics(t, ctl, "http://mcpmux/metrics", "")
		return s.value("mcpmux_requests_total", with(demoTools, "outcome", "cancelled")) == 1, nil
	})
	assert.Equal(t, 3.0, s.value("mcpmux_requests_total", with(demoTools, "outcome", "ok")), "echo x3")
	assert.Equal(t, 1.0, s.value("mcpmux_requests_total", with(demoTools, "outcome", "timeout")), "the slow call")
	assert.Equal(t, 1.0, s.value("mcpmux_requests_total", with(demoTools, "outcome", "error")), "the unknown tool")
	assert.Equal(t, 1.0, s.value("mcpmux_requests_total", map[string]string{"server": "demo", "method": "tools/list", "outcome": "ok"}))
	assert.Equal(t, 1.0, s.value("mcpmux_requests_total", map[string]string{"server": "demo", "method": "tools/list", "outcome": "refused"}), "before initialize")
	assert.Equal(t, 6.0, s.value("mcpmux_request_duration_seconds", demoTools), "every forwarded tools/call is timed")
	assert.Equal(t, 0.0, s.value("mcpmux_requests_in_flight", map[string]string{"server": "demo"}))
	assert.Equal(t, 2.0, s.value("mcpmux_sessions", map[string]string{"server": "demo", "transport": "unix"}))
	assert.Contains(t, seriesOf(s, "mcpmux_sessions"), `server="demo",transport="websocket"`, "a transport with no session is 0, not absent")
	assert.Greater(t, s.value("mcpmux_bytes_total", map[string]string{"server": "demo", "direction": "up"}), 0.0)
	assert.Greater(t, s.value("mcpmux_bytes_total", map[string]string{"server": "demo", "direction": "down"}), 0.0)
	for _, q := range []string{"outbox", "stdin"} {
		assert.Contains(t, seriesOf(s, "mcpmux_queue_bytes"), `queue="`+q+`",server="demo"`)
	}
	for _, f := range s {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotContains(t, l.GetValue(), "hi", "no argument reaches a label")
			}
		}
	}

	// The web listener: behind the token.
	web := &http.Client{Timeout: ioTimeout}
	url := "http://" + d.webAddr() + "/metrics"
	_, code := getMetrics(t, web, url, "")
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	_, code = getMetrics(t, web, url, "wrong")
	assert.Equal(t, http.StatusUnauthorized, code, "a wrong token")
	ws, code := getMetrics(t, web, url, wsToken)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, 3.0, ws.value("mcpmux_requests_total", with(demoTools, "outcome", "ok")))
}

// TestMetricsOffTheWebByDefault: without metrics = true, the web listener
// has no /metrics, even with the token; the control endpoint has.
func TestMetricsOffTheWebByDefault(t *testing.T) {
	d := startDaemon(t, demo("demo", nil), wsListen)
	_, code := getMetrics(t, &http.Client{Timeout: ioTimeout}, "http://"+d.webAddr()+"/metrics", wsToken)
	assert.Equal(t, http.StatusNotFound, code)
	s, code := getMetrics(t, controlClient(d), "http://mcpmux/metrics", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, s, "go_goroutines", "the runtime's metrics too")
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// seriesOf lists the label sets of family name, as `k="v",...` in label
// order.
func seriesOf(s scrape, name string) []string {
	var out []string
	for _, m := range s[name].GetMetric() {
		var parts []string
		for _, l := range m.GetLabel() {
			parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
		}
		out = append(out, strings.Join(parts, ","))
	}
	return out
}

// TestMetricsCountRestartsByCause: a crash and a `mcpmux restart` are
// counted apart, and the call the crash ended as failed.
func TestMetricsCountRestartsByCause(t *testing.T) {
	d := startDaemon(t, demo("demo", nil, `restart_backoff = "10ms"`), "")
	ctl := controlClient(d)
	c := dial(t, d.socket("demo"))
	_, err := c.initialize("2025-06-18")
	require.NoError(t, err)
	m, err := c.tool(`1`, "crash", nil)
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindError, m.Kind, "the crash fails the call")

	restarts := func(cause string) map[string]string { return map[string]string{"server": "demo", "cause": cause} }
	var s scrape
	testutil.Eventually(t, readyTimeout, "the crash's restart is counted", func() (bool, error) {
		s, _ = getMetrics(t, ctl, "http://mcpmux/metrics", "")
		return s.value("mcpmux_restarts_total", restarts("exited")) == 1, nil
	})
	assert.Equal(t, 1.0, s.value("mcpmux_requests_total", map[string]string{"server": "demo", "method": "tools/call", "outcome": "failed"}))
	assert.Equal(t, 0.0, s.value("mcpmux_restarts_total", restarts("requested")))

	out, err := mcpmux(t.Context(), "restart", "--config", d.path, "demo").CombinedOutput()
	require.NoError(t, err, "mcpmux restart demo: %s", out)
	testutil.Eventually(t, readyTimeout, "the requested restart is counted", func() (bool, error) {
		s, _ = getMetrics(t, ctl, "http://mcpmux/metrics", "")
		return s.value("mcpmux_restarts_total", restarts("requested")) == 1, nil
	})
	assert.Equal(t, 1.0, s.value("mcpmux_restarts_total", restarts("exited")))
}

// TestMetricsCountServerRequests: a sampling request the server sends is
// counted as routed to the session whose call caused it, then answered;
// one while only a session that did not declare sampling has a call in
// flight, as no_client.
func TestMetricsCountServerRequests(t *testing.T) {
	d := startDaemon(t, demo("demo", nil), "")
	ctl := controlClient(d)
	c := dial(t, d.socket("demo"))
	m, err := c.call(`"init"`, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{"sampling": map[string]any{}},
		"clientInfo":      map[string]any{"name": "sampler", "version": "1"},
	})
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindResult, m.Kind)
	require.NoError(t, c.send(notification("notifications/initialized", nil)))
	require.NoError(t, c.send(request(`"ask"`, "tools/call", toolParams("ask", map[string]any{"text": "hello"}))))
	for {
		m, err = c.read()
		require.NoError(t, err)
		if m.Kind == jsonrpc.KindRequest && m.Method == "sampling/createMessage" {
			break
		}
	}
	require.NoError(t, c.send(jsonrpc.Response(m.ID, json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}`))))
	m, _, err = c.await(`"ask"`)
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "the ask call: %s", m.Frame)

	plain := dial(t, d.socket("demo"))
	_, err = plain.initialize("2025-06-18")
	require.NoError(t, err)
	_, err = plain.tool(`"ask"`, "ask", map[string]any{"text": "hello"})
	require.NoError(t, err)

	sampling := func(outcome string) map[string]string {
		return map[string]string{"server": "demo", "method": "sampling/createMessage", "outcome": outcome}
	}
	var s scrape
	testutil.Eventually(t, readyTimeout, "the refused sampling is counted", func() (bool, error) {
		s, _ = getMetrics(t, ctl, "http://mcpmux/metrics", "")
		return s.value("mcpmux_server_requests_total", sampling("no_client")) == 1, nil
	})
	assert.Equal(t, 1.0, s.value("mcpmux_server_requests_total", sampling("routed")))
	assert.Equal(t, 1.0, s.value("mcpmux_server_requests_total", sampling("answered")))
	assert.Equal(t, 0.0, s.value("mcpmux_server_requests_total", sampling("missing_capability")))
}
