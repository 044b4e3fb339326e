package metrics_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGoroutinesDocumented(t *testing.T) { testutil.CheckGoroutineDocs(t, ".") }

// scrape is the registry's text, one series a line.
func scrape(t *testing.T, r *metrics.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	return rec.Body.String()
}

func TestLabelsAreBounded(t *testing.T) {
	r := metrics.New()
	s := r.Server("fs")
	s.Done("tools/call", metrics.OK, time.Now())
	s.Done("x-client-chose-this", metrics.OK, time.Now())
	s.Done("tools/call", "no such outcome", time.Time{})
	s.Restart("something new")
	s.ServerRequest("made/up", metrics.Routed)
	out := scrape(t, r)
	for _, want := range []string{
		`mcpmux_requests_total{method="tools/call",outcome="ok",server="fs"} 1`,
		`mcpmux_requests_total{method="other",outcome="ok",server="fs"} 1`,
		`mcpmux_requests_total{method="tools/call",outcome="refused",server="fs"} 1`,
		`mcpmux_request_duration_seconds_count{method="tools/call",server="fs"} 1`,
		`mcpmux_restarts_total{cause="other",server="fs"} 1`,
		`mcpmux_server_requests_total{method="other",outcome="routed",server="fs"} 1`,
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "x-client-chose-this")
	assert.NotContains(t, out, "something new")
}

func TestNilServerCountsNothing(t *testing.T) {
	var s *metrics.Server
	s.Done("tools/call", metrics.OK, time.Now())
	s.Restart(metrics.Requested)
	s.ServerRequest("elicitation/create", metrics.NoClient)
	s.SessionEnded(1, 2)
}

// TestCountingDoesNotAllocate: once a series exists, a request's end costs
// no allocation.
func TestCountingDoesNotAllocate(t *testing.T) {
	s := metrics.New().Server("fs")
	start := time.Now()
	s.Done("tools/call", metrics.OK, start)
	allocs := testing.AllocsPerRun(1000, func() { s.Done("tools/call", metrics.OK, start) })
	assert.Zero(t, allocs)
}

func TestBytesNeverGoDown(t *testing.T) {
	r := metrics.New()
	s := r.Server("fs")
	live := []metrics.Snapshot{{Server: "fs", BytesIn: 100, BytesOut: 200, Sessions: map[string]int{"unix": 1}}}
	r.Watch(func() []metrics.Snapshot { return live })
	assert.Contains(t, scrape(t, r), `mcpmux_bytes_total{direction="up",server="fs"} 100`)
	// The session left the status before its bytes joined the departed.
	live = []metrics.Snapshot{{Server: "fs"}}
	assert.Contains(t, scrape(t, r), `mcpmux_bytes_total{direction="up",server="fs"} 100`)
	s.SessionEnded(100, 200)
	out := scrape(t, r)
	assert.Contains(t, out, `mcpmux_bytes_total{direction="up",server="fs"} 100`)
	assert.Contains(t, out, `mcpmux_bytes_total{direction="down",server="fs"} 200`)
	assert.False(t, strings.Contains(out, `mcpmux_sessions{server="fs",transport="unix"}`), "no session now")
}
