package benchkit

import (
	"strings"
	"testing"
	"time"
)

// A peer that failed while measured is shown as failed, and the targets
// that compare with it are not measured, where a zero figure would have
// made them look met or missed.
func TestFailedPeerRow(t *testing.T) {
	r := &Report{Rows: []Row{
		{Backend: BackendGo, Path: PathHTTPRelay, P50: 200 * time.Microsecond, CallsPerSec: 20000},
		{Backend: BackendGo, Path: PathHTTP, P50: 220 * time.Microsecond, CallsPerSec: 19000},
		{Backend: BackendGo, Path: PathSGHTTP, Failed: "pipelined: connection reset by peer"},
		{Backend: BackendGo, Path: PathProxyHTTP, P50: 700 * time.Microsecond, CallsPerSec: 2000},
	}}
	table := r.PathsTable()
	if !strings.Contains(table, "| "+PathSGHTTP+" | failed while measured: pipelined: connection reset by peer |") {
		t.Errorf("the failed peer's row does not say so:\n%s", table)
	}
	var sg, proxy int
	for _, tg := range r.Targets() {
		switch {
		case strings.Contains(tg.Name, "/ "+PathSGHTTP):
			sg++
			if tg.Measured || tg.Got != "not measured" {
				t.Errorf("%s: got %q (measured %v), want not measured", tg.Name, tg.Got, tg.Measured)
			}
		case strings.Contains(tg.Name, "/ "+PathProxyHTTP):
			proxy++
			if !tg.Measured || !tg.Met {
				t.Errorf("%s: got %q, met %v; want measured and met", tg.Name, tg.Got, tg.Met)
			}
		}
	}
	if sg != 2 || proxy != 2 {
		t.Errorf("targets against supergateway's and mcp-proxy's HTTP: %d and %d, want 2 each", sg, proxy)
	}
}

// A missed connect row says where its time goes, with the ratio of the
// row that sets connect against a byte bridge in front of the same daemon;
// a met one says nothing.
func TestConnectMissExplained(t *testing.T) {
	round := func(cps, floor float64) []FloorRound { return []FloorRound{{CPS: cps, FloorCPS: floor}} }
	r := &Report{Floors: []FloorRow{
		{Path: PathConnect, Floor: PathBridge, Rounds: round(50000, 90000)},
		{Path: PathConnectOwn, Floor: PathBridgeSocket, Rounds: round(61000, 62000)},
	}}
	table := r.TargetsTable()
	if !strings.Contains(table, "itself is at 0.98× the calls/s of a byte bridge") {
		t.Errorf("the missed connect row is not explained by the bridge-alone row:\n%s", table)
	}
	r.Floors[0].Rounds = round(85000, 90000)
	if table := r.TargetsTable(); strings.Contains(table, "itself is at") {
		t.Errorf("a met connect row is explained:\n%s", table)
	}
}
