package integration

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/integration/benchkit"
)

// TestBenchHarness runs the side-by-side benchmark (go run ./bench -quick)
// with the binaries TestMain built, server-everything and supergateway from
// ./node, and checks that every path, backend, row against a floor and
// figure gave a result, that every target was measured and that the chart
// renders. It judges no figure and no time.
func TestBenchHarness(t *testing.T) {
	rw := needRealWorld(t) // node and the npm packages; skipped under -short
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := benchkit.Run(ctx, benchkit.Options{Short: true, Mcpmux: bins.mcpmux, NodeDir: rw.dir, Node: rw.node})
	require.NoError(t, err)
	t.Logf("in %v:\n%s", time.Since(start).Round(time.Millisecond), rep.Summary())

	checkFloors(t, rep)
	for _, be := range benchkit.Backends() {
		for _, p := range benchkit.Paths() {
			row := rep.Row(be, p)
			if !assert.NotNil(t, row, "%s over %s: no row", be, p) {
				continue
			}
			assert.Positive(t, row.P50, "%s over %s: p50", be, p)
			assert.GreaterOrEqual(t, row.P99, row.P50, "%s over %s: p99", be, p)
			assert.Positive(t, row.CallsPerSec, "%s over %s: calls/s", be, p)
			assert.Equal(t, be == benchkit.BackendGo, row.Huge, "%s over %s: huge results measured", be, p)
			if row.Huge {
				assert.Len(t, row.Sizes, len(rep.Counts.MsgSizes), "%s over %s: message sizes", be, p)
				for i, d := range row.Sizes {
					assert.Positive(t, d, "%s over %s: %d-byte echo", be, p, rep.Counts.MsgSizes[i])
				}
				assert.Positive(t, row.Huge1, "%s over %s: 1 MB time", be, p)
				assert.Positive(t, row.Huge10, "%s over %s: 10 MB time", be, p)
				assert.Positive(t, row.MBps1, "%s over %s: 1 MB MB/s", be, p)
				assert.Positive(t, row.MBps10, "%s over %s: 10 MB MB/s", be, p)
			}
		}
	}
	assert.Len(t, rep.Rows, len(benchkit.Backends())*len(benchkit.Paths()), "one row per backend and path")

	for _, p := range benchkit.AggregatePaths() {
		for _, n := range rep.Counts.Sessions {
			if (p == benchkit.PathRelay && n > rep.Counts.RelayMax) || (p == benchkit.PathSG && n > rep.Counts.PeerMax) {
				continue
			}
			assert.Positive(t, rep.Agg(p, n), "%s with %d sessions: calls/s", p, n)
		}
	}
	assert.Len(t, rep.Counts.Sessions, 4, "four session counts")

	assert.Positive(t, rep.Ready.Socket, "client #%d over the socket", rep.Ready.Nth)
	assert.Positive(t, rep.Ready.Connect, "client #%d through mcpmux connect", rep.Ready.Nth)
	assert.Positive(t, rep.Ready.Cold, "cold start")
	if rep.Memory {
		for name, m := range map[string]benchkit.Memory{
			"daemon with no session": rep.Idle.Base, "daemon with idle sessions": rep.Idle.With,
			"one server per client": rep.Shared.Each, "shared: daemon": rep.Shared.Daemon,
			"shared: server tree": rep.Shared.Server, "shared: bridges": rep.Shared.Bridges,
		} {
			assert.Positive(t, m.RSS, "%s: RSS", name)
			assert.Positive(t, m.PSS, "%s: PSS", name)
		}
	}
	targets := rep.Targets()
	// Issue 32's: connect's calls/s, large result and readiness; the
	// large result over the socket, WebSocket and HTTP; two sessionless
	// POSTs, two bridges, the socket's p50 and calls/s. Issue 18's:
	// WebSocket and HTTP against their floors, HTTP against two peers.
	// Issue 6's: per backend, then the large result and the Nth client.
	want := 12 + 8 + 4*len(benchkit.Backends()) + 2
	if rep.Memory {
		want += 3 + 2 // connect's RSS, peak RSS, per idle session; idle and shared memory
		assert.Positive(t, rep.Peak.HWM, "peak RSS under large results")
		assert.GreaterOrEqual(t, rep.Peak.HWM, rep.Peak.Base, "peak RSS after the large results against before")
	}
	assert.Len(t, targets, want, "the targets")
	for _, tg := range targets {
		assert.True(t, tg.Measured, "target %q was not measured", tg.Name)
	}

	chart := filepath.Join(t.TempDir(), "bench.png")
	f, err := os.Create(chart)
	require.NoError(t, err)
	require.NoError(t, rep.WriteChart(f))
	require.NoError(t, f.Close())
	b, err := os.ReadFile(chart)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err, "the chart is a PNG")
	assert.Greater(t, img.Bounds().Dx(), 600, "chart width")
}

// checkFloors checks that every row against a floor has every round, and
// a figure on both sides in each, and that the table shows every row.
func checkFloors(t *testing.T, rep *benchkit.Report) {
	table := rep.FloorsTable()
	require.Len(t, rep.Floors, len(benchkit.FloorPaths()), "a row against a floor per path")
	for i, f := range rep.Floors {
		assert.Equal(t, benchkit.FloorPaths()[i], f.Path, "row %d", i)
		assert.NotEmpty(t, f.Floor, "%s: its floor", f.Path)
		assert.Len(t, f.Rounds, rep.Counts.FloorRounds, "%s: rounds", f.Path)
		assert.Equal(t, i < 4, f.Huge, "%s: large results measured", f.Path)
		for k, r := range f.Rounds {
			assert.Positive(t, r.P50, "%s round %d: p50", f.Path, k+1)
			assert.Positive(t, r.FloorP50, "%s round %d: its floor's p50", f.Path, k+1)
			assert.Positive(t, r.CPS, "%s round %d: calls/s", f.Path, k+1)
			assert.Positive(t, r.FloorCPS, "%s round %d: its floor's calls/s", f.Path, k+1)
			if f.Huge {
				assert.Positive(t, r.Huge, "%s round %d: large result", f.Path, k+1)
				assert.Positive(t, r.FloorHuge, "%s round %d: its floor's large result", f.Path, k+1)
			}
		}
		assert.Positive(t, f.P50Ratio().Med, "%s: p50 ratio", f.Path)
		assert.LessOrEqual(t, f.P50Ratio().Min, f.P50Ratio().Max, "%s: p50 range", f.Path)
		assert.Positive(t, f.CPSRatio().Med, "%s: calls/s ratio", f.Path)
		assert.Contains(t, table, "| "+f.Path+" | "+f.Floor+" |", "the table's row")
	}
}

// TestABHarness runs the old-against-new comparison (go run ./bench -ab)
// with the binary TestMain built on both sides and few calls, and checks
// that every path and round gave figures and that the table shows them. It
// judges no figure.
func TestABHarness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := benchkit.AB(ctx, benchkit.ABOptions{Old: bins.mcpmux, New: bins.mcpmux, Calls: 20, Rounds: 2, Short: true})
	require.NoError(t, err)
	summary := rep.Summary()
	t.Logf("\n%s", summary)
	require.Len(t, rep.Rows, 2*3, "a row per path and round")
	for _, row := range rep.Rows {
		assert.Positive(t, row.Old, "%s round %d: old p50", row.Path, row.Round)
		assert.Positive(t, row.New, "%s round %d: new p50", row.Path, row.Round)
		assert.Contains(t, summary, "| "+row.Path+" | "+strconv.Itoa(row.Round)+" |")
	}
}
