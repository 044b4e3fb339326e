package main

import (
	"fmt"
	"strings"

	"github.com/mcpmux/mcpmux/integration/benchkit"
)

// markdown is BENCHMARKS.md: the machine, the method of every figure, the
// targets, the tables and the chart.
func markdown(rep *benchkit.Report) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	mdHeader(w, rep)
	mdFloors(w, rep)
	mdPaths(w)
	mdPerPath(w, rep.Counts)
	mdOthers(w, rep)
	mdTables(w, rep)
	return b.String()
}

// printf is how the parts of markdown write.
type printf func(format string, args ...any)

// mdHeader is the top of the file: how it was written, the machine and the
// targets.
func mdHeader(w printf, rep *benchkit.Report) {
	m := rep.Machine
	w("# Benchmarks\n\n")
	w("Written by `cd integration && go run ./bench -write` (%s), in one run: every figure below\n", m.Date.Format("2006-01-02 15:04 UTC"))
	w("comes from the same run on the same machine, one measurement after the other. On a shared\n")
	w("2-core VM figures move between runs by tens of percent (p99 by more), so compare figures\n")
	w("within this file, not across runs. Nothing here is enforced: the targets are reported as\n")
	w("met or missed. `go run` builds mcpmux without the race detector.\n\n")
	if rep.Short {
		w("**Quick run (`-quick`): tiny counts, these figures only show that every path works.**\n\n")
	}
	w("![echo latency and pipelined throughput per path](%s)\n\n", chartFile)

	w("## Machine\n\n")
	w("- `uname -a`: `%s`\n", m.Uname)
	w("- CPUs: %d (the client, the proxy and the server share them)\n", m.CPUs)
	w("- Go: %s; Node: %s\n", m.Go, m.Node)
	w("- mcpmux: built from this repository at %s without cgo (static), as the README installs it\n", m.Commit)
	w("- supergateway 4.0.0, mcp-proxy 6.7.19, @modelcontextprotocol/server-everything 2026.8.31 (pinned in `integration/node`)\n\n")

	w("## Targets\n\n")
	w("The targets of issue #32, then those of #18 and #6 that #32 did not replace, each computed from\n")
	w("figures of this run. A ratio against a floor is the median of the interleaved rounds (below),\n")
	w("with their range in brackets; a ratio against a peer compares figures of the per-path table,\n")
	w("measured minutes apart on the same machine.\n\n")
	w("%s", rep.TargetsTable())

}

// mdFloors is the rows measured against a floor, interleaved: how, and
// the table.
func mdFloors(w printf, rep *benchkit.Report) {
	n := rep.Counts
	w("\n## Each path against its floor, interleaved\n\n")
	w("Separate runs on this machine move by tens of percent; calls interleaved in one client do not.\n")
	w("So each row below is one mcpmux path and its floor, each over a session of its own, opened\n")
	w("together (and warmed with %d calls) and measured from one client in turn: %d sequential echo\n", n.FloorWarm, n.FloorEcho)
	w("calls in pairs (path, floor; which goes first alternates); then %d bursts of %d pipelined calls\n", n.FloorBursts, n.FloorBurst)
	w("(%d in flight) of each in turn; then, for the first four rows, results of %s (%d of each) in turn\n", n.InFlight, benchkit.Size(n.HugeSizes[1]), n.FloorHuge)
	w("with direct stdio as the third (after one untimed each). That is one round; there are %d, each\n", n.FloorRounds)
	w("visiting every row in turn. A ratio is taken per round, and the table gives the median and range\n")
	w("of the rounds; the large result's time over the floor is the median of the paired differences.\n\n")
	w("All rows reach the Go echo server (`integration/bench/echoserver`), which serves both eras per\n")
	w("request: one daemon runs it as `echo` (the default protocol, which initializes: legacy) and as\n")
	w("`echo26` (`protocol = \"modern\"`). The floors: the byte relay for the socket and WebSocket, the\n")
	w("byte bridge in front of it for `connect`, the HTTP relay for Streamable HTTP (described below);\n")
	w("`mcpmux connect echo` against the byte bridge in front of the daemon's socket, so that the two\n")
	w("differ by the bridge alone (where the first row's floor also swaps the daemon for the relay);\n")
	w("`mcpmux connect` with no name (the endpoint `all`, tool `echo__echo`) against `mcpmux connect echo`;\n")
	w("a 2026-07-28 sessionless POST (the envelope in every request, `MCP-Protocol-Version`,\n")
	w("`Mcp-Method` and `Mcp-Name` headers, no session id) against a 2025 session on the same URL;\n")
	w("and a 2026-07-28 session over the socket (no initialize: `server/discover`, then enveloped\n")
	w("requests) on `echo26` (modern: no bridge) or on `echo` (the bridge to a legacy server), and a\n")
	w("legacy session on `echo26` (the bridge to a modern server), each against a legacy session on\n")
	w("`echo`: the legacy path on the same server program.\n\n")
	w("%s\n", rep.FloorsTable())
}

// mdPaths describes the backends and the paths.
func mdPaths(w printf) {
	w("\n## What is measured\n\n")
	w("**Backends.** *%s*: `integration/bench/echoserver`, a minimal Go stdio server (one request at a\n", benchkit.BackendGo)
	w("time, answers flushed in batches while more input waits), the floor: what remains is the cost of\n")
	w("the path. *%s*: the reference TypeScript server under node, tool `echo`.\n\n", benchkit.BackendEverything)
	w("**Paths**, the same for both backends:\n\n")
	w("- **%s**: the client spawns the server and talks on its stdin/stdout.\n", benchkit.PathDirect)
	w("- **%s**: the floor of any proxy: `integration/bench/relay`, a process of its own (as mcpmux is)\n", benchkit.PathRelay)
	w("  whose Unix socket joins each accepted connection to a server process of its own by two\n")
	w("  `io.Copy` loops, nothing parsed.\n")
	w("- **%s**: the floor of a stdio bridge: `integration/bench/bridge`, a process that copies its\n", benchkit.PathBridge)
	w("  stdin to the relay's socket and the socket to its stdout, in front of the relay: what `mcpmux connect`\n")
	w("  is measured against.\n")
	w("- **%s**: `<socket_dir>/NAME.sock` of `mcpmux serve`, one daemon serving both backends.\n", benchkit.PathSocket)
	w("- **%s**: the stdio bridge `mcpmux connect NAME` to that socket (one process more).\n", benchkit.PathConnect)
	w("- **%s**: `ws://127.0.0.1:PORT/servers/NAME` of the same daemon.\n", benchkit.PathWS)
	w("- **%s**: the peer: `node …/supergateway/dist/index.js --stdio \"<server>\" --outputTransport ws\n", benchkit.PathSG)
	w("  --logLevel none`, which runs one server for all its WebSocket clients; at `ws://127.0.0.1:PORT/message`.\n")
	w("  It turns ids into strings on the way in and back with `parseInt`, so every client here uses\n")
	w("  numeric ids.\n")
	w("- **%s**: the floor of a Streamable HTTP front: `integration/bench/httprelay`, which starts a server\n", benchkit.PathHTTPRelay)
	w("  process per session at its initialize, writes each POST's message to it and sends the answer, matched\n")
	w("  by id, back as one SSE event in one write; nothing validated.\n")
	w("- **%s**: `http://127.0.0.1:PORT/servers/NAME` of the same daemon (the 2025 binding).\n", benchkit.PathHTTP)
	w("- **%s**: `supergateway --stdio \"<server>\" --outputTransport streamableHttp --stateful`, a server\n", benchkit.PathSGHTTP)
	w("  process per session (its stateless mode starts one per request).\n")
	w("- **%s**: mcp-proxy (npm `mcp-proxy`) `--server stream -- <server>`, one server for all its clients.\n\n", benchkit.PathProxyHTTP)
	w("HTTP clients are Go's `net/http` with keep-alive connections, one POST per message (each in a goroutine\n")
	w("of its own, so pipelined calls are pipelined), the session id and protocol version on every request.\n\n")
	w("Every session sends `initialize` and `notifications/initialized` first. WebSocket clients\n")
	w("(gorilla/websocket) offer the subprotocol `mcp`.\n\n")
}

// mdPerPath describes the figures measured over every path.
func mdPerPath(w printf, n benchkit.Counts) {
	w("**Per path** (one session per path, all of them open at once; each did %d untimed warm-up\n", n.Warm)
	w("calls, which node's JIT needs). The echoes and pipelined calls are made in %d rounds, each of\n", max(1, n.Rounds))
	w("which visits every path in turn, so that a spell of a slower machine touches every path alike:\n\n")
	w("- *Echo p50/p99*: %d sequential `tools/call echo` in all, each timed from send to answer.\n", n.Echo/max(1, n.Rounds)*max(1, n.Rounds))
	w("- *Pipelined calls/s*: %d echo calls in all, sent while keeping %d unanswered; calls divided\n", n.Pipelined/max(1, n.Rounds)*max(1, n.Rounds), n.InFlight)
	w("  by the time to the last answer of each round, summed.\n")
	w("- *Large results* (Go backend only: server-everything has no such tool): `tools/call huge`\n")
	w("  returning %s of text (%d times), then %s (%d times), one at a time: the median time per\n",
		benchkit.Size(n.HugeSizes[0]), n.Huge1, benchkit.Size(n.HugeSizes[1]), n.Huge10)
	w("  result, and answer bytes received per second.")
	if n.Huge10 > 1 {
		w(" One untimed %s call comes first and sizes the buffers on the way.", benchkit.Size(n.HugeSizes[1]))
	}
	w("\n  supergateway, which takes seconds per 10 MB, gets %d call of each size only. The target is\n", n.GatewayHugeReps)
	w("  the median time mcpmux's socket adds to a %s result over direct stdio.\n\n", benchkit.Size(n.HugeSizes[1]))
}

// mdOthers describes the figures of many sessions, idle sessions, the Nth
// client and the memory.
func mdOthers(w printf, rep *benchkit.Report) {
	n := rep.Counts
	w("**Many sessions** (Go backend): %s sessions open and initialized, then all of them make\n", joinInts(n.Sessions))
	w("echo calls one after the other (one in flight each) for %v; the table gives the calls\n", n.AggFor)
	w("answered per second, all sessions together. mcpmux serves them all from one server process.\n")
	w("The relay starts one server process per session, so it is measured up to %d sessions only;\n", n.RelayMax)
	w("direct stdio has no shared sessions (it would be one server per client, as the relay is).\n\n")
	w("**Idle sessions**: a fresh `mcpmux serve` with the Go server; `VmRSS` (and PSS, from\n")
	w("`smaps_rollup`) of the daemon process, with no session, then with %d socket sessions that\n", n.Idle)
	w("each did initialize and one ping, and nothing since. `max_sessions` is raised above 1,024\n")
	w("for this; the daemon's open-file limit was %d.\n\n", rep.Idle.OpenFiles)
	w("**Peak under large results**: a fresh `mcpmux serve` with the Go server; %d socket sessions,\n", n.PeakSessions)
	w("each initialized, then each asks for a %s result at the same time, %d time(s); the daemon's\n", benchkit.Size(n.HugeSizes[1]), n.PeakReps)
	w("`VmHWM` (peak RSS since it started) before and after.\n\n")
	w("**Client #%d ready** (server-everything): with the server running in a fresh daemon and\n", n.Nth)
	w("%d clients connected, the time from connecting to the answer of `tools/list` (after\n", n.Nth-1)
	w("`initialize`), median of %d connections over the socket and of %d new `mcpmux connect`\n", n.SocketReps, n.ConnectReps)
	w("processes; against the median of %d cold starts of the server itself (spawn node,\n", n.Copies)
	w("`initialize`, `tools/list`).\n\n")
	w("**Shared memory** (server-everything): %d server processes, one per client, each initialized\n", n.Copies)
	w("with `tools/list` answered, RSS summed over each process tree; against `mcpmux serve` plus its\n")
	w("tree (the reaper and the one server) with %d clients connected through `mcpmux connect`.\n", n.Copies)
	w("RSS counts the pages node's processes share once per process; PSS divides them among\n")
	w("the processes, so the PSS column is the fairer sum. The bridges' own memory is shown apart.\n\n")

}

// mdTables is every table of figures.
func mdTables(w printf, rep *benchkit.Report) {
	w("## Echo, pipelined and large results\n\n")
	w("%s", rep.PathsTable())
	if t := rep.SizesTable(); t != "" {
		w("## Message sizes (%s, one call at a time, median of %d; the peers a tenth of that)\n\n", benchkit.BackendGo, rep.Counts.MsgReps)
		w("%s\n", t)
	}
	w("## Ratios\n\nFor p50 lower is better; for calls/s higher is better.\n\n")
	w("%s", rep.RatiosTable())
	w("\n## Many sessions at once (%s, calls/s)\n\n", benchkit.BackendGo)
	w("%s", rep.AggregateTable())
	w("\n## Memory and the Nth client\n\n")
	if !rep.Memory {
		w("The memory figures need Linux's /proc; this run left them out.\n\n")
	}
	w("%s", rep.MemoryTables())
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%d", x)
	}
	return strings.Join(s, ", ")
}
