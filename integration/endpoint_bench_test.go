package integration

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// BenchmarkEndpointBesideDirect measures, in one run, echo through the
// endpoint all (demo__echo) beside a direct socket session of the same
// server: the p50 of calls one at a time, and calls per second with 64 in
// flight (the median of five turns each). Run it with
//
//	cd integration && go test -run '^$' -bench EndpointBesideDirect -benchtime 2000x .
func BenchmarkEndpointBesideDirect(b *testing.B) {
	d := startDaemon(b, demo("demo", nil), "")
	direct, through := open(b, d.socket("demo")), open(b, d.socket("all"))
	echo := func(c *client, id, tool string) time.Duration {
		t0 := time.Now()
		m, err := c.tool(id, tool, map[string]string{"text": "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if text, err := resultText(m); err != nil || text != "bench" {
			b.Fatalf("echo: %q, %v", text, err)
		}
		return time.Since(t0)
	}
	// The two take turns, so that the machine's moods fall on both alike.
	var latDirect, latEndpoint []time.Duration
	i := 0
	for b.Loop() {
		latDirect = append(latDirect, echo(direct, strconv.Itoa(i), "echo"))
		latEndpoint = append(latEndpoint, echo(through, strconv.Itoa(i), "demo__echo"))
		i++
	}
	b.StopTimer()
	var rateDirect, rateEndpoint []float64
	for range 5 {
		rateDirect = append(rateDirect, pipelined(b, direct, "echo"))
		rateEndpoint = append(rateEndpoint, pipelined(b, through, "demo__echo"))
	}
	p50d, _ := percentiles(latDirect)
	p50e, _ := percentiles(latEndpoint)
	rd, re := median(rateDirect), median(rateEndpoint)
	b.ReportMetric(float64(p50d.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(p50e.Microseconds()), "endpoint-p50-µs")
	b.ReportMetric(float64(p50e)/float64(p50d), "p50-ratio")
	b.ReportMetric(rd, "direct-calls/s")
	b.ReportMetric(re, "endpoint-calls/s")
	b.ReportMetric(re/rd, "calls/s-ratio")
}

// median of a few figures.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// pipelined sends 64 calls at a time, 20 times, and returns the calls
// answered per second.
func pipelined(b *testing.B, c *client, tool string) float64 {
	const window, rounds = 64, 20
	start := time.Now()
	for r := range rounds {
		frames := make([][]byte, window)
		for k := range frames {
			frames[k] = toolCall(fmt.Sprintf(`"p%d-%d"`, r, k), tool, map[string]string{"text": "x"})
		}
		if err := c.send(frames...); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < window; {
			m, err := c.read()
			if err != nil {
				b.Fatal(err)
			}
			if m.Kind == jsonrpc.KindResult {
				got++
			} else if m.Kind == jsonrpc.KindError {
				b.Fatalf("pipelined call failed: %s", m.Frame)
			}
		}
	}
	return float64(window*rounds) / time.Since(start).Seconds()
}
