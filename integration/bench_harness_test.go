package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/integration/benchkit"
)

// TestBenchHarness runs the side-by-side benchmark (go run ./integration/bench)
// in short mode with the binaries TestMain built, and checks that every path
// worked and gave figures. It judges no figure.
func TestBenchHarness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	rep, err := benchkit.Run(ctx, benchkit.Options{Short: true, Mcpmux: bins.mcpmux, Demoserver: bins.demoserver})
	require.NoError(t, err)
	t.Logf("in %v:\n%s\n%s", time.Since(start).Round(time.Millisecond), rep.Table(), rep.Ratios())
	require.Len(t, rep.Rows, 5, "one row per path")
	for _, row := range rep.Rows {
		assert.Positive(t, row.P50, "%s: p50", row.Path)
		assert.Positive(t, row.P99, "%s: p99", row.Path)
		assert.Positive(t, row.CallsPerSec, "%s: calls/s", row.Path)
		assert.Positive(t, row.MBps1, "%s: 1 MB MB/s", row.Path)
		assert.Positive(t, row.MBps10, "%s: 10 MB MB/s", row.Path)
	}
	assert.Less(t, time.Since(start), 15*time.Second, "the short run must stay under 15 s")
}
