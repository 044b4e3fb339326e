package main

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/integration/benchkit"
)

// floorsReport is a report with every row against a floor, three rounds
// each, and the Go backend's socket row.
func floorsReport() *benchkit.Report {
	rep := &benchkit.Report{Counts: benchkit.Counts{FloorRounds: 3, FloorEcho: 10, FloorBursts: 2, FloorBurst: 10, FloorHuge: 1,
		InFlight: 64, HugeSizes: [2]int{1_000_000, 10_000_000}, Sessions: []int{1}, Rounds: 1}}
	for i, p := range benchkit.FloorPaths() {
		f := benchkit.FloorRow{Path: p, Floor: benchkit.PathRelay, Huge: i < 4}
		for k := range 3 {
			r := benchkit.FloorRound{P50: time.Duration(100+10*k) * time.Microsecond, FloorP50: 100 * time.Microsecond, P50Diff: time.Duration(7+k) * time.Microsecond,
				CPS: float64(9000 + 1000*k), FloorCPS: 10000}
			if f.Huge {
				r.Huge, r.FloorHuge, r.HugeDiff = 20*time.Millisecond, 15*time.Millisecond, time.Duration(k+4)*time.Millisecond
				r.HugeAdded, r.FloorHugeAdded = 9*time.Millisecond, 4*time.Millisecond
			}
			f.Rounds = append(f.Rounds, r)
		}
		rep.Floors = append(rep.Floors, f)
	}
	rep.Rows = []benchkit.Row{{Backend: benchkit.BackendGo, Path: benchkit.PathSocket, P50: time.Millisecond, P99: 2 * time.Millisecond, CallsPerSec: 1000},
		{Backend: benchkit.BackendEverything, Path: benchkit.PathSocket, P50: time.Millisecond, P99: 2 * time.Millisecond, CallsPerSec: 1000}}
	return rep
}

// BENCHMARKS.md shows every row against its floor with the median and
// range of its rounds, and issue 32's targets judged from them.
func TestMarkdownFloors(t *testing.T) {
	md := markdown(floorsReport())
	if !strings.Contains(md, "## Each path against its floor, interleaved") {
		t.Fatalf("no section for the rows against a floor:\n%s", md)
	}
	for _, p := range benchkit.FloorPaths() {
		if !strings.Contains(md, "| "+p+" | "+benchkit.PathRelay+" |") {
			t.Errorf("no row for %s", p)
		}
	}
	for _, want := range []string{
		// p50s 100, 110, 120 µs against 100; paired differences 7, 8, 9 µs;
		// ratios 1.00, 1.10, 1.20: median 1.10, range 1.00–1.20.
		"| 110.0 µs / 100.0 µs (+8.0 µs) | 1.10× (1.00–1.20) |",
		// calls/s 0.90, 1.00, 1.10.
		"| 1.00× (0.90–1.10) |",
		// the large result over the floor: 4, 5, 6 ms.
		"| +5.00 ms (+4.00 ms … +6.00 ms) |",
		"| #32 | go echo: echo p50, mcpmux unix socket / byte relay (unix) (median of 3 interleaved rounds) | ≤ 1.10× | 1.10× (1.00–1.20) | met |",
		"| #32 | go echo: pipelined calls/s, mcpmux unix socket / byte relay (unix) (median of 3 interleaved rounds) | ≥ 0.95× | 1.00× (0.90–1.10) | met |",
		"| #32 | go echo: a 10 MB result through mcpmux unix socket, over byte relay (unix) | ≤ +3.00 ms | +5.00 ms (+4.00 ms … +6.00 ms) | missed |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
}

// The chart draws the rows against a floor above the per-path rows.
func TestChartFloors(t *testing.T) {
	var b bytes.Buffer
	if err := floorsReport().WriteChart(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if h := img.Bounds().Dy(); h < 3*4*96-10 {
		t.Errorf("chart height %d: want three rows of plots", h)
	}
}
