package benchkit

import (
	"fmt"
	"time"
)

// floorRatio is a target on a ratio of the row of path against its floor:
// the median of the interleaved rounds, with their range.
func (r *Report) floorRatio(path, want string, ok func(float64) bool, fig func(FloorRow) Spread, what string) Target {
	t := Target{Want: want, Got: "not measured"}
	f := r.Floor(path)
	if f == nil {
		t.Name = fmt.Sprintf("%s: %s, %s / its floor", BackendGo, what, path)
		return t
	}
	t.Name = fmt.Sprintf("%s: %s, %s / %s (median of %d interleaved rounds)", BackendGo, what, path, f.Floor, len(f.Rounds))
	if s := fig(*f); s.Med > 0 {
		t.Got, t.Measured, t.Met = spreadRatio(s), true, ok(s.Med)
	}
	return t
}

// hugeOver is a target on the time path adds to a large result over
// limit, where over(round) is that time in one round.
func (r *Report) hugeOver(path, floorName string, limit time.Duration, over func(i int) (time.Duration, bool)) Target {
	t := Target{Name: fmt.Sprintf("%s: a %s result through %s, over %s", BackendGo, mb(r.Counts.HugeSizes[1]), path, floorName),
		Want: "≤ +" + dur(limit), Got: "not measured"}
	f := r.Floor(path)
	if f == nil || !f.Huge || len(f.Rounds) == 0 {
		return t
	}
	var v []float64
	for i := range f.Rounds {
		d, ok := over(i)
		if !ok {
			return t
		}
		v = append(v, float64(d))
	}
	s := spreadOf(v)
	t.Got, t.Measured, t.Met = spreadDur(s), true, time.Duration(s.Med) <= limit
	return t
}

// issue32Targets are the acceptance targets of issue #32, from the
// interleaved rows, the memory figures and the Nth client.
func (r *Report) issue32Targets() []Target {
	ts := []Target{r.floorRatio(PathConnect, "≥ 0.90×", atLeast(0.90), FloorRow.CPSRatio, "pipelined calls/s")}
	ts[0].Why = r.whyConnect()
	rounds := func(path string) []FloorRound {
		if f := r.Floor(path); f != nil {
			return f.Rounds
		}
		return nil
	}
	ts = append(ts, r.hugeOver(PathConnect, PathBridge, 5*time.Millisecond, func(i int) (time.Duration, bool) {
		return rounds(PathConnect)[i].HugeDiff, true
	}))
	if r.Memory && r.Shared.Copies > 0 {
		// Most of a bridge's RSS is the binary's pages, which every copy
		// shares: its PSS, beside it, is what each one adds.
		per := r.Shared.Bridges.RSS / int64(r.Shared.Copies)
		pss := r.Shared.Bridges.PSS / int64(r.Shared.Copies)
		ts = append(ts, Target{Name: "an idle `mcpmux connect`: RSS", Want: "≤ 5.0 MiB", Got: mib(per) + " (PSS " + mib(pss) + ")", Measured: per > 0, Met: per > 0 && per <= 5<<20, Why: whyStart})
	}
	if rd := r.Ready; rd.Socket > 0 && rd.Connect > 0 {
		ts = append(ts, Target{Name: fmt.Sprintf("%s: a new `mcpmux connect` ready, server running", BackendEverything),
			Want: "≤ socket + 2 ms (" + dur(rd.Socket+2*time.Millisecond) + ")", Got: dur(rd.Connect), Measured: true,
			Met: rd.Connect <= rd.Socket+2*time.Millisecond, Why: whyStart})
	}
	for _, p := range []string{PathSocket, PathWS} {
		ts = append(ts, r.hugeOver(p, PathRelay, 3*time.Millisecond, func(i int) (time.Duration, bool) { return rounds(p)[i].HugeDiff, true }))
	}
	// HTTP's own floor is the HTTP relay; the target is the byte relay's
	// time, taken from the socket's row in the same round.
	ts = append(ts, r.hugeOver(PathHTTP, PathRelay, 3*time.Millisecond, func(i int) (time.Duration, bool) {
		sock := rounds(PathSocket)
		if i >= len(sock) || !r.Floor(PathSocket).Huge {
			return 0, false
		}
		return rounds(PathHTTP)[i].HugeAdded - sock[i].FloorHugeAdded, true
	}))
	ts = append(ts, r.memory32Targets()...)
	ts = append(ts,
		r.floorRatio(PathSessionless, "≥ 0.85×", atLeast(0.85), FloorRow.CPSRatio, "pipelined calls/s"),
		r.floorRatio(PathSessionlessNew, "≥ 0.85×", atLeast(0.85), FloorRow.CPSRatio, "pipelined calls/s"),
		r.floorRatio(PathModernOnLegacy, "≥ 0.80×", atLeast(0.80), FloorRow.CPSRatio, "pipelined calls/s"),
		r.floorRatio(PathLegacyOnModern, "≥ 0.80×", atLeast(0.80), FloorRow.CPSRatio, "pipelined calls/s"),
		r.floorRatio(PathSocket, "≤ 1.10×", atMost(1.10), FloorRow.P50Ratio, "echo p50"),
		r.floorRatio(PathSocket, "≥ 0.95×", atLeast(0.95), FloorRow.CPSRatio, "pipelined calls/s"))
	ts[len(ts)-1].Why = whyRelay
	for i := range ts {
		ts[i].Issue = "#32"
	}
	return ts
}

// memory32Targets are issue #32's memory targets: the peak under large
// results read at once, and an idle socket session.
func (r *Report) memory32Targets() []Target {
	if !r.Memory {
		return nil
	}
	pk := r.Peak
	ts := []Target{{Name: fmt.Sprintf("mcpmux serve peak RSS while %d sessions each read a %s result at once", pk.Sessions, mb(pk.Size)),
		Want: "≤ 120 MiB", Got: mib(pk.HWM), Measured: pk.HWM > 0, Met: pk.HWM > 0 && pk.HWM <= 120<<20}}
	if r.Idle.Sessions > 0 {
		per := float64(r.Idle.With.RSS-r.Idle.Base.RSS) / float64(r.Idle.Sessions)
		ts = append(ts, Target{Name: fmt.Sprintf("mcpmux serve RSS per idle socket session (%d sessions)", r.Idle.Sessions),
			Want: "≤ 12 KiB", Got: fmt.Sprintf("%.1f KiB", per/1024), Measured: true, Met: per <= 12<<10})
	}
	return ts
}
