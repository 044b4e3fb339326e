package benchkit

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Row returns the row of backend over path, or nil.
func (r *Report) Row(backend, path string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Backend == backend && r.Rows[i].Path == path {
			return &r.Rows[i]
		}
	}
	return nil
}

// Agg returns the aggregate calls/s of path with sessions at once, or 0.
func (r *Report) Agg(path string, sessions int) float64 {
	for _, a := range r.Aggregate {
		if a.Path == path && a.Sessions == sessions {
			return a.CallsPerSec
		}
	}
	return 0
}

// Target is one of the issues' targets, with what this run measured.
type Target struct {
	Issue    string // the issue that set it: #6, #18, #32
	Name     string
	Want     string
	Got      string
	Measured bool // false: a figure it needs was not measured
	Met      bool
	Why      string // what the profiles showed, printed when it is missed
}

// Where the daemon's time goes when a target is missed, from profiles of
// the daemon under the same load (perf record -g, strace -c, GODEBUG=gctrace=1).
const (
	whyRelay = "Per call, 64 in flight, the daemon makes about as many system calls as the relay (perf stat: 0.52 " +
		"against 0.44, the relay's splices included) but takes 7.9 µs of CPU against the relay's 2.6 µs. Its " +
		"samples (perf record -g): 42 % kernel, most of it switching threads in and out (schedule, whose " +
		"interrupt enabling is costly on this paravirtualised VM), 7 % the Go scheduler, 9 % validating and " +
		"parsing each frame both ways, 6 % the id rewrite and the routing, 4 % allocation and collection. " +
		"Since reads and writes no longer tell the scheduler of their system calls (internal/rawio), no call " +
		"wakes the monitor thread: one steady client's daemon CPU per call fell from 81 to 53 µs. Across runs " +
		"this ratio moves around the target from run to run on this machine."
	whyServer = "With server-everything the server is the bottleneck: it answers 24–28k calls/s directly and " +
		"the byte relay gets 16–22k; mcpmux's WebSocket runs at about the relay's rate (see the tables), so its " +
		"ratio to supergateway is bounded by what node leaves of two cores, not by the daemon."
	whyHuge = "Large results cost the daemon fresh memory: perf shows about 18 % of its samples in page faults " +
		"(this VM makes each one expensive) and most of the rest in copying (kernel to read buffer to frame) " +
		"and validation. With GOGC=off every 10 MB answer takes about 100 ms (all memory fresh); with the " +
		"collector on, answers take 12–25 ms once the heap has grown, but a 10 MB allocation made while a " +
		"cycle marks waits for it (gctrace: 80–130 ms mark phases at the slow answers). The relay copies " +
		"through fixed buffers and allocates nothing (and still adds several milliseconds to a 10 MB result here; " +
		"see its row)."
	whyStart = "A new `mcpmux connect` starts the one binary it shares with the daemon (22 MB): perf stat over 20 " +
		"starts gives 20 ms of CPU and 566 page faults, against 4.6 ms and 145 for an empty Go program. perf " +
		"record puts 36 % of a start's samples in package initialisation, about half of it the Prometheus " +
		"client's chain (collectors, procfs, protobuf descriptors, expvar), and 20 % in the runtime's own set-up " +
		"of the binary's tables. Most of an idle one's RSS is that binary's pages, shared by every connect and " +
		"the daemon (PSS beside it). A program with connect's imports alone starts in 6.5 ms of wall time " +
		"against mcpmux's 18.6 ms: meeting these needs connect in a binary that does not link the daemon."
	whyReady = "tools/list is the server's own work: server-everything answers it directly in about 2 ms at " +
		"its median (0.6 ms at best); mcpmux answers initialize itself in about 0.5 ms."
)

// whyConnect is why the connect row's calls/s ratio is missed, with the
// figure of the row that isolates the bridge.
func (r *Report) whyConnect() string {
	own := r.Floor(PathConnectOwn)
	if own == nil || len(own.Rounds) == 0 {
		return ""
	}
	return fmt.Sprintf("`mcpmux connect` itself is at %.2f× the calls/s of a byte bridge in front of the same "+
		"daemon (the row %q). The connect row's floor also puts the byte relay in the daemon's place, so its "+
		"ratio is mostly the socket's: the daemon's CPU per call against the relay's (the point that begins \"Per call\").",
		own.CPSRatio().Med, PathConnectOwn)
}

// Targets compares the run with the targets, each as a ratio or a figure
// of this run. They are reported, never enforced.
func (r *Report) Targets() []Target {
	var ts []Target
	ratio := func(name, want string, ok func(float64) bool, num, den float64) {
		t := Target{Name: name, Want: want, Got: "not measured"}
		if num > 0 && den > 0 {
			v := num / den
			t.Got, t.Measured, t.Met = fmt.Sprintf("%.2f×", v), true, ok(v)
		}
		ts = append(ts, t)
	}
	for _, b := range Backends() {
		relay, sock, ws, sg := r.Row(b, PathRelay), r.Row(b, PathSocket), r.Row(b, PathWS), r.Row(b, PathSG)
		if relay == nil || sock == nil || ws == nil || sg == nil {
			continue
		}
		if f := r.Floor(PathSocket); b == BackendGo && f != nil && len(f.Rounds) > 0 {
			// The Go backend's socket against the relay: the interleaved rounds.
			ts = append(ts, r.floorRatio(PathSocket, "≤ 1.15×", atMost(1.15), FloorRow.P50Ratio, "echo p50"),
				r.floorRatio(PathSocket, "≥ 0.90×", atLeast(0.90), FloorRow.CPSRatio, "pipelined calls/s"))
		} else {
			ratio(b+": echo p50, mcpmux socket / byte relay", "≤ 1.15×", atMost(1.15), float64(sock.P50), float64(relay.P50))
			ratio(b+": pipelined calls/s, mcpmux socket / byte relay", "≥ 0.90×", atLeast(0.90), sock.CallsPerSec, relay.CallsPerSec)
		}
		ts[len(ts)-2].Why, ts[len(ts)-1].Why = whyRelay, whyRelay
		ratio(b+": echo p50, mcpmux websocket / supergateway websocket", "< 1×", func(v float64) bool { return v < 1 },
			float64(ws.P50), float64(sg.P50))
		ratio(b+": pipelined calls/s, mcpmux websocket / supergateway websocket", "≥ 1.5×", func(v float64) bool { return v >= 1.5 },
			ws.CallsPerSec, sg.CallsPerSec)
		if b == BackendEverything {
			ts[len(ts)-1].Why = whyServer
		}
	}
	if direct, sock := r.Row(BackendGo, PathDirect), r.Row(BackendGo, PathSocket); direct != nil && sock != nil && direct.Huge && sock.Huge {
		added := sock.Huge10 - direct.Huge10
		ts = append(ts, Target{Name: fmt.Sprintf("%s: time a %s result adds, mcpmux socket over direct", BackendGo, mb(r.Counts.HugeSizes[1])),
			Want: "< 10 ms", Got: dur(added), Measured: true, Met: added < 10*time.Millisecond, Why: whyHuge})
	}
	if r.Memory {
		const limit = 64 << 20
		ts = append(ts, Target{Name: fmt.Sprintf("mcpmux serve RSS with %d idle sessions", r.Idle.Sessions),
			Want: "≤ 64 MiB", Got: mib(r.Idle.With.RSS), Measured: true, Met: r.Idle.With.RSS <= limit})
	}
	ts = append(ts, Target{Name: fmt.Sprintf("%s: client #%d ready (initialize + tools/list) over the socket, server running", BackendEverything, r.Ready.Nth),
		Want: "< 5 ms", Got: dur(r.Ready.Socket), Measured: r.Ready.Socket > 0, Met: r.Ready.Socket > 0 && r.Ready.Socket < 5*time.Millisecond,
		Why: whyReady})
	if r.Memory {
		ratio(fmt.Sprintf("%s: RSS of mcpmux + 1 server / %d servers", BackendEverything, r.Shared.Copies), "≤ 20 %",
			func(v float64) bool { return v <= 0.20 }, float64(r.Shared.Daemon.RSS+r.Shared.Server.RSS), float64(r.Shared.Each.RSS))
		ts[len(ts)-1].Got = pct(float64(r.Shared.Daemon.RSS+r.Shared.Server.RSS), float64(r.Shared.Each.RSS))
	}
	for i := range ts {
		ts[i].Issue = "#6"
	}
	return append(append(r.issue32Targets(), r.floorTargets()...), ts...)
}

// floorTargets are issue #18's: WebSocket and Streamable HTTP against
// their floors (the median of the interleaved rounds), and the HTTP front
// against its peers (the per-path table). Its targets for the socket,
// connect, large results and idle sessions are issue #32's now.
func (r *Report) floorTargets() []Target {
	var ts []Target
	row := func(p string) *Row { return r.Row(BackendGo, p) }
	ratio := func(name, want string, ok func(float64) bool, num, den float64) {
		t := Target{Name: BackendGo + ": " + name, Want: want, Got: "not measured"}
		if num > 0 && den > 0 {
			v := num / den
			t.Got, t.Measured, t.Met = fmt.Sprintf("%.2f×", v), true, ok(v)
		}
		ts = append(ts, t)
	}
	ts = append(ts, r.floorRatio(PathWS, "≤ 1.10×", atMost(1.10), FloorRow.P50Ratio, "echo p50"),
		r.floorRatio(PathWS, "≥ 0.90×", atLeast(0.90), FloorRow.CPSRatio, "pipelined calls/s"),
		r.floorRatio(PathHTTP, "≤ 1.15×", atMost(1.15), FloorRow.P50Ratio, "echo p50"),
		r.floorRatio(PathHTTP, "≥ 0.90×", atLeast(0.90), FloorRow.CPSRatio, "pipelined calls/s"))
	for _, peer := range []string{PathSGHTTP, PathProxyHTTP} {
		if a, p := row(PathHTTP), row(peer); a != nil && p != nil {
			ratio("echo p50, "+PathHTTP+" / "+peer, "≤ 0.50×", atMost(0.5), float64(a.P50), float64(p.P50))
			ratio("pipelined calls/s, "+PathHTTP+" / "+peer, "≥ 2×", atLeast(2), a.CallsPerSec, p.CallsPerSec)
		}
	}
	for i := range ts {
		ts[i].Issue = "#18"
	}
	return ts
}

func atMost(x float64) func(float64) bool  { return func(v float64) bool { return v <= x } }
func atLeast(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }

// TargetsTable is the targets as a Markdown table.
func (r *Report) TargetsTable() string {
	var b strings.Builder
	b.WriteString("| issue | target | wanted | measured | |\n|---|---|---:|---:|---|\n")
	for _, t := range r.Targets() {
		verdict := "missed"
		switch {
		case !t.Measured:
			verdict = "–"
		case t.Met:
			verdict = "met"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", t.Issue, t.Name, t.Want, t.Got, verdict)
	}
	var why []string
	for _, t := range r.Targets() {
		if t.Measured && !t.Met && t.Why != "" && !slices.Contains(why, t.Why) {
			why = append(why, t.Why)
		}
	}
	if len(why) > 0 {
		b.WriteString("\n**Where a target is missed**, what the profiles of the daemon show:\n\n")
		for _, w := range why {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	return b.String()
}

// PathsTable is the echo, pipelined and huge figures of every path, one
// table per backend.
func (r *Report) PathsTable() string {
	var b strings.Builder
	for _, be := range Backends() {
		fmt.Fprintf(&b, "**%s**\n\n", be)
		huge := r.Row(be, PathDirect) != nil && r.Row(be, PathDirect).Huge
		fmt.Fprintf(&b, "| path | echo p50 | echo p99 | pipelined calls/s (%d in flight) |", r.Counts.InFlight)
		if huge {
			s1, s10 := mb(r.Counts.HugeSizes[0]), mb(r.Counts.HugeSizes[1])
			fmt.Fprintf(&b, " %s result | %s MB/s | %s result | %s MB/s |", s1, s1, s10, s10)
		}
		b.WriteString("\n|---|---:|---:|---:|")
		if huge {
			b.WriteString("---:|---:|---:|---:|")
		}
		b.WriteString("\n")
		for _, p := range Paths() {
			row := r.Row(be, p)
			if row == nil {
				continue
			}
			if row.Failed != "" {
				fmt.Fprintf(&b, "| %s | failed while measured: %.120s |", p, row.Failed)
				b.WriteString("\n")
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f |", p, dur(row.P50), dur(row.P99), row.CallsPerSec)
			if huge {
				fmt.Fprintf(&b, " %s | %.0f | %s | %.0f |", dur(row.Huge1), row.MBps1, dur(row.Huge10), row.MBps10)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// SizesTable is the median echo round trip of each path with messages of
// each size (the Go backend).
func (r *Report) SizesTable() string {
	if len(r.Counts.MsgSizes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| path |")
	for _, n := range r.Counts.MsgSizes {
		fmt.Fprintf(&b, " %s echo p50 |", mb(n))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(r.Counts.MsgSizes)) + "\n")
	for _, p := range Paths() {
		row := r.Row(BackendGo, p)
		if row == nil || len(row.Sizes) != len(r.Counts.MsgSizes) {
			continue
		}
		fmt.Fprintf(&b, "| %s |", p)
		for _, d := range row.Sizes {
			if d == 0 {
				b.WriteString(" refused |")
				continue
			}
			fmt.Fprintf(&b, " %s |", dur(d))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// RatiosTable is each mcpmux path's p50 and calls/s over its floor's (the
// relay; for connect the byte bridge in front of it; for HTTP the HTTP
// relay), the direct path's and supergateway's (over HTTP, its HTTP mode).
func (r *Report) RatiosTable() string {
	var b strings.Builder
	b.WriteString("| backend | path | p50 / floor | p50 / direct | p50 / supergateway | calls/s / floor | calls/s / direct | calls/s / supergateway |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	x := func(a, c float64) string {
		if a <= 0 || c <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", a/c)
	}
	for _, be := range Backends() {
		direct := r.Row(be, PathDirect)
		for _, p := range []string{PathSocket, PathConnect, PathWS, PathHTTP} {
			// Each path against its own floor and its own peer.
			floor, peer := PathRelay, PathSG
			switch p {
			case PathConnect:
				floor = PathBridge
			case PathHTTP:
				floor, peer = PathHTTPRelay, PathSGHTTP
			}
			row, relay, sg := r.Row(be, p), r.Row(be, floor), r.Row(be, peer)
			if row == nil || direct == nil || relay == nil || sg == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", be, p,
				x(float64(row.P50), float64(relay.P50)), x(float64(row.P50), float64(direct.P50)), x(float64(row.P50), float64(sg.P50)),
				x(row.CallsPerSec, relay.CallsPerSec), x(row.CallsPerSec, direct.CallsPerSec), x(row.CallsPerSec, sg.CallsPerSec))
		}
	}
	return b.String()
}

// AggregateTable is the calls/s of every aggregate path per session count.
func (r *Report) AggregateTable() string {
	var b strings.Builder
	b.WriteString("| path |")
	for _, n := range r.Counts.Sessions {
		fmt.Fprintf(&b, " %d session%s |", n, plural(n))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(r.Counts.Sessions)) + "\n")
	for _, p := range AggregatePaths() {
		fmt.Fprintf(&b, "| %s |", p)
		for _, n := range r.Counts.Sessions {
			if v := r.Agg(p, n); v > 0 {
				fmt.Fprintf(&b, " %.0f |", v)
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// MemoryTables is the idle-session, Nth-client and shared-server figures.
func (r *Report) MemoryTables() string {
	var b strings.Builder
	if r.Memory {
		i := r.Idle
		b.WriteString("**Idle sessions** (`mcpmux serve`, one Go echo server)\n\n")
		b.WriteString("| sessions | daemon RSS | daemon PSS | RSS per session |\n|---:|---:|---:|---:|\n")
		fmt.Fprintf(&b, "| 0 | %s | %s | |\n", mib(i.Base.RSS), mib(i.Base.PSS))
		perSession := "–"
		if i.Sessions > 0 {
			perSession = fmt.Sprintf("%.1f KiB", float64(i.With.RSS-i.Base.RSS)/1024/float64(i.Sessions))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n\n", i.Sessions, mib(i.With.RSS), mib(i.With.PSS), perSession)
	}
	if r.Memory && r.Peak.Sessions > 0 {
		pk := r.Peak
		b.WriteString("**Peak under large results** (a fresh `mcpmux serve`, one Go echo server)\n\n")
		b.WriteString("| sessions reading at once | result | times | daemon peak RSS before | after |\n|---:|---:|---:|---:|---:|\n")
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s |\n\n", pk.Sessions, mb(pk.Size), pk.Reps, mib(pk.Base), mib(pk.HWM))
	}
	rd := r.Ready
	fmt.Fprintf(&b, "**Client #%d ready** (%s; medians)\n\n", rd.Nth, BackendEverything)
	b.WriteString("| how | initialize + tools/list answered after |\n|---|---:|\n")
	fmt.Fprintf(&b, "| mcpmux unix socket, server running, %d clients already connected | %s |\n", rd.Nth-1, dur(rd.Socket))
	fmt.Fprintf(&b, "| a new `mcpmux connect`, server running, %d clients already connected | %s |\n", rd.Nth-1, dur(rd.Connect))
	fmt.Fprintf(&b, "| cold start: spawn the server directly | %s |\n\n", dur(rd.Cold))
	if r.Memory {
		s := r.Shared
		fmt.Fprintf(&b, "**One %s per client against one shared** (%d clients)\n\n", BackendEverything, s.Copies)
		b.WriteString("| what | RSS | PSS |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| %d server processes, one per client (each process tree summed) | %s | %s |\n", s.Copies, mib(s.Each.RSS), mib(s.Each.PSS))
		fmt.Fprintf(&b, "| `mcpmux serve` | %s | %s |\n", mib(s.Daemon.RSS), mib(s.Daemon.PSS))
		fmt.Fprintf(&b, "| its server tree (reaper + one server) | %s | %s |\n", mib(s.Server.RSS), mib(s.Server.PSS))
		fmt.Fprintf(&b, "| **mcpmux + one server** | **%s** (%s) | **%s** (%s) |\n",
			mib(s.Daemon.RSS+s.Server.RSS), pct(float64(s.Daemon.RSS+s.Server.RSS), float64(s.Each.RSS)),
			mib(s.Daemon.PSS+s.Server.PSS), pct(float64(s.Daemon.PSS+s.Server.PSS), float64(s.Each.PSS)))
		fmt.Fprintf(&b, "| the clients' %d `mcpmux connect` bridges, not counted above | %s | %s |\n", s.Copies, mib(s.Bridges.RSS), mib(s.Bridges.PSS))
	}
	return b.String()
}

// Summary is every table, for a terminal.
func (r *Report) Summary() string {
	return strings.Join([]string{r.FloorsTable(), r.PathsTable(), r.SizesTable(), r.RatiosTable(), r.AggregateTable(), r.MemoryTables(), r.TargetsTable()}, "\n")
}

func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "−" + dur(-d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d.Nanoseconds())/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// mb is a size in decimal units, as the large results are chosen.
func mb(n int) string {
	if n < 1_000_000 {
		return fmt.Sprintf("%d kB", n/1000)
	}
	return fmt.Sprintf("%d MB", n/1_000_000)
}

// Size is how the report writes a size of large result.
func Size(n int) string { return mb(n) }

func pct(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*a/b)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
