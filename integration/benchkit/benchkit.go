// Package benchkit measures, side by side and in one run, the cost of the
// ways a client can reach a stdio MCP server: directly over its stdio,
// through a plain byte relay on a Unix socket (the floor), through a byte
// bridge process in front of it (the floor of a stdio bridge), through
// mcpmux's Unix socket, through `mcpmux connect`, over mcpmux's WebSocket,
// over supergateway's WebSocket (the peer), and over Streamable HTTP:
// a minimal HTTP-to-stdio relay (its floor), mcpmux, supergateway and
// mcp-proxy. Two backends: a minimal Go echo
// server (integration/bench/echoserver, the floor) and the reference
// server-everything under node. Besides latency and throughput per path it
// measures aggregate throughput with many sessions, the daemon's memory with
// idle sessions, how soon one more client is served by a running server, and
// the memory of one shared server against one per client. First, each
// mcpmux path (with the endpoint all and the 2026-07-28 paths) is measured
// against its floor interleaved in one client, call by call, in rounds
// (floors.go), which holds still where separate runs do not. The program
// integration/bench prints the figures and writes BENCHMARKS.md and its
// chart; integration/bench_harness_test.go runs it in short mode.
package benchkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options says what to measure and with which programs.
type Options struct {
	Short      bool   // tiny counts: only checks that every path and figure works
	Mcpmux     string // prebuilt mcpmux; empty: built with CGO_ENABLED=0 go build
	Echoserver string // prebuilt integration/bench/echoserver; empty: built
	Relay      string // prebuilt integration/bench/relay; empty: built
	Bridge     string // prebuilt integration/bench/bridge; empty: built
	HTTPRelay  string // prebuilt integration/bench/httprelay; empty: built
	NodeDir    string // integration/node, where npm ci installed server-everything and supergateway
	Node       string // the node executable; empty: node on PATH
	Progress   io.Writer
}

// The paths, in the order they are measured.
const (
	PathDirect    = "direct stdio"
	PathRelay     = "byte relay (unix)"
	PathBridge    = "byte bridge + relay"
	PathSocket    = "mcpmux unix socket"
	PathConnect   = "mcpmux connect"
	PathWS        = "mcpmux websocket"
	PathSG        = "supergateway websocket"
	PathHTTPRelay = "http relay"
	PathHTTP      = "mcpmux streamable http"
	PathSGHTTP    = "supergateway streamable http"
	PathProxyHTTP = "mcp-proxy streamable http"
)

// Paths lists every path, in the order they are measured.
func Paths() []string {
	return []string{PathDirect, PathRelay, PathBridge, PathSocket, PathConnect, PathWS, PathSG,
		PathHTTPRelay, PathHTTP, PathSGHTTP, PathProxyHTTP}
}

// peerPaths are the other projects' paths: slow with large results, so
// measured with fewer repetitions of them.
var peerPaths = []string{PathSG, PathSGHTTP, PathProxyHTTP}

// The backends.
const (
	BackendGo         = "go echo"
	BackendEverything = "server-everything"
)

// Backends lists every backend, in the order they are measured.
func Backends() []string { return []string{BackendGo, BackendEverything} }

// AggregatePaths are the paths measured with many sessions at once.
func AggregatePaths() []string { return []string{PathRelay, PathSocket, PathWS, PathSG, PathHTTP} }

// Counts are the sizes of a run.
type Counts struct {
	Warm, Echo      int           // sequential echo calls: warm-up, then timed
	Pipelined       int           // pipelined echo calls, InFlight at once
	Rounds          int           // the timed echoes and pipelined calls are split into rounds that visit every path in turn
	InFlight        int           //
	Huge1, Huge10   int           // the two large results, one at a time, each after one untimed (if more than 1)
	Sessions        []int         // aggregate: sessions at once, per level
	AggFor          time.Duration // aggregate: how long each level runs
	RelayMax        int           // aggregate: the relay (one server process per session) up to this many
	PeerMax         int           // aggregate: supergateway up to this many
	Idle            int           // idle sessions for the daemon's memory
	Nth             int           // the client whose readiness is timed
	SocketReps      int           // ... over the socket, this many times
	ConnectReps     int           // ... through mcpmux connect, this many times
	Copies          int           // server-everything processes, one per client, against one shared
	HugeSizes       [2]int        // bytes of the two huge results
	GatewayHugeReps int           // supergateway is slow with huge results: fewer repetitions
	MsgSizes        []int         // echo messages of these sizes (request and answer alike)...
	MsgReps         int           // ... this many times each, one at a time

	// The rows against a floor, interleaved in one client (Report.Floors).
	FloorWarm   int // untimed echo calls per session of a row (the Go server needs no JIT warm-up)
	FloorRounds int // rounds, each visiting every row
	FloorEcho   int // paired sequential echoes per row and round
	FloorBursts int // pipelined bursts of each side per row and round...
	FloorBurst  int // ... of this many calls, InFlight at once
	FloorHuge   int // large results (HugeSizes[1]) per side per row and round, in triples with direct stdio

	PeakSessions, PeakReps int // peak daemon RSS: this many sessions read a large result at once, this many times
}

func counts(short bool) Counts {
	if short {
		return Counts{Warm: 2, Echo: 20, Pipelined: 200, Rounds: 2, InFlight: 64, Huge1: 1, Huge10: 1,
			Sessions: []int{1, 2, 4, 8}, AggFor: 30 * time.Millisecond, RelayMax: 4, PeerMax: 8,
			Idle: 20, Nth: 3, SocketReps: 2, ConnectReps: 1, Copies: 3,
			HugeSizes: [2]int{100_000, 1_000_000}, GatewayHugeReps: 1,
			MsgSizes: []int{1_000, 64_000}, MsgReps: 3,
			FloorWarm: 2, FloorRounds: 3, FloorEcho: 20, FloorBursts: 2, FloorBurst: 100, FloorHuge: 1, PeakSessions: 8, PeakReps: 1}
	}
	return Counts{Warm: 2000, Echo: 2000, Pipelined: 20000, Rounds: 10, InFlight: 64, Huge1: 15, Huge10: 7,
		Sessions: []int{1, 16, 256, 1000, 5000, 10000}, AggFor: 1500 * time.Millisecond, RelayMax: 256, PeerMax: 1000,
		Idle: 10000, Nth: 10, SocketReps: 50, ConnectReps: 20, Copies: 10,
		HugeSizes: [2]int{1_000_000, 10_000_000}, GatewayHugeReps: 1,
		MsgSizes: []int{1_000, 64_000, 1_000_000}, MsgReps: 100,
		FloorWarm: 500, FloorRounds: 3, FloorEcho: 2000, FloorBursts: 4, FloorBurst: 2000, FloorHuge: 5, PeakSessions: 8, PeakReps: 3}
}

// Row is the figures of one backend over one path.
type Row struct {
	Backend, Path string
	P50, P99      time.Duration   // sequential echo round trip
	CallsPerSec   float64         // pipelined echo, InFlight at once
	Huge          bool            // the huge figures were measured (the Go backend only)
	Huge1, Huge10 time.Duration   // median time of one 1 MB and one 10 MB result
	MBps1, MBps10 float64         // answer bytes received per second
	Sizes         []time.Duration // median echo round trip with each of Counts.MsgSizes (the Go backend only)
	Failed        string          // a peer that failed while measured: why; its figures are left out
}

// AggRow is the aggregate throughput of one path with some sessions at once.
type AggRow struct {
	Path        string
	Sessions    int
	CallsPerSec float64
}

// Idle is the daemon's memory with many initialized, idle sessions.
type Idle struct {
	Sessions   int
	Base, With Memory // with no session, and with Sessions
	OpenFiles  int    // the daemon's soft open-file limit
}

// Memory is a resident set and a proportional set (shared pages divided
// among the processes that map them), in bytes.
type Memory struct{ RSS, PSS int64 }

func (m Memory) plus(o Memory) Memory { return Memory{m.RSS + o.RSS, m.PSS + o.PSS} }

// Ready is how long one more client (the Nth) waits for initialize and
// tools/list to be answered by a server-everything that mcpmux already
// runs, against starting server-everything itself.
type Ready struct {
	Nth             int
	Socket, Connect time.Duration // medians: over the socket; through a new `mcpmux connect`
	Cold            time.Duration // median: spawn server-everything, initialize, tools/list
}

// Shared is the memory of Copies server-everything processes, one per
// client, against one shared by Copies clients through mcpmux.
type Shared struct {
	Copies  int
	Each    Memory // sum over the Copies process trees
	Daemon  Memory // mcpmux serve itself
	Server  Memory // the tree under it: the reaper and server-everything
	Bridges Memory // the Copies `mcpmux connect` bridges the clients ran
}

// Machine describes where the figures were taken.
type Machine struct {
	Uname, Go, Node string
	CPUs            int
	Date            time.Time
	Commit          string // set by the caller, if it knows
}

// Report is the result of a run.
type Report struct {
	Short     bool
	Counts    Counts
	Machine   Machine
	Rows      []Row
	Aggregate []AggRow
	Idle      Idle
	Ready     Ready
	Shared    Shared
	Memory    bool // the memory figures were measured (Linux only)
	Floors    []FloorRow
	Peak      Peak
}

// Peak is the daemon's peak resident set (VmHWM of a fresh daemon) while
// Sessions socket sessions each read a Size-byte result at once, Reps
// times; Base is its RSS before.
type Peak struct {
	Sessions, Size, Reps int
	Base, HWM            int64
}

// token is the http_token of the daemons.
const token = "bench-token"

// backend is one server the paths reach.
type backend struct {
	name   string   // BackendGo or BackendEverything
	server string   // its name in the daemon's config
	argv   []string // how to run it
	huge   bool     // it has the huge tool
}

// run is the state of one Run.
type run struct {
	ctx        context.Context
	o          Options
	n          Counts
	dir        string
	progress   io.Writer
	start      time.Time
	everything string // server-everything's entry point
	gateway    string // supergateway's
	mcpProxy   string // mcp-proxy's
	track      tracker
}

// Run builds what it needs and measures everything, one thing at a time.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	r := &run{ctx: ctx, o: o, n: counts(o.Short), progress: o.Progress, start: time.Now()}
	if r.progress == nil {
		r.progress = io.Discard
	}
	// One descriptor per session on our side (the levels are measured one
	// at a time), a few per relay session, and some to spare.
	if err := raiseOpenFiles(max(r.n.Idle, r.n.Sessions[len(r.n.Sessions)-1]) + 4*r.n.RelayMax + 512); err != nil {
		return nil, err
	}
	if err := r.findNode(); err != nil {
		return nil, err
	}
	r.dir, err = os.MkdirTemp("", "mxb") // short: socket paths must fit sun_path
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(r.dir)
	if err := r.build(); err != nil {
		return nil, err
	}
	r.track.init()
	stop := context.AfterFunc(ctx, r.track.closeAll)
	defer func() {
		if !stop() {
			<-r.track.done // closeAll ran: wait until it is over
		}
		if err == nil {
			err = context.Cause(ctx)
		}
	}()

	rep = &Report{Short: o.Short, Counts: r.n, Machine: machine(r.o.Node), Memory: canMeasureMemory}
	backends := []backend{
		{name: BackendGo, server: "echo", argv: []string{r.o.Echoserver}, huge: true},
		{name: BackendEverything, server: "everything", argv: []string{r.o.Node, r.everything, "stdio"}},
	}
	if err := r.floors(rep, backends[0]); err != nil {
		return nil, fmt.Errorf("interleaved rows: %w", err)
	}
	if err := r.paths(rep, backends); err != nil {
		return nil, err
	}
	if canMeasureMemory {
		if rep.Idle, err = r.idle(backends[0]); err != nil {
			return nil, fmt.Errorf("idle sessions: %w", err)
		}
		if rep.Peak, err = r.peak(backends[0]); err != nil {
			return nil, fmt.Errorf("peak memory: %w", err)
		}
	}
	if rep.Ready, rep.Shared, err = r.readyAndShared(backends[1]); err != nil {
		return nil, fmt.Errorf("ready and shared: %w", err)
	}
	return rep, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.progress, "%6.1fs "+format+"\n", append([]any{time.Since(r.start).Seconds()}, args...)...)
}

// findNode finds node and the two npm packages.
func (r *run) findNode() error {
	if r.o.Node == "" {
		node, err := exec.LookPath("node")
		if err != nil {
			return fmt.Errorf("node is not on PATH (%w): the benchmarks need Node 20 or newer", err)
		}
		r.o.Node = node
	}
	if r.o.NodeDir == "" {
		return errors.New("Options.NodeDir is empty: it must name integration/node")
	}
	r.everything = filepath.Join(r.o.NodeDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	r.gateway = filepath.Join(r.o.NodeDir, "node_modules", "supergateway", "dist", "index.js")
	r.mcpProxy = filepath.Join(r.o.NodeDir, "node_modules", "mcp-proxy", "dist", "bin", "mcp-proxy.mjs")
	for _, f := range []string{r.everything, r.gateway, r.mcpProxy} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w: run npm ci in %s (./scripts/test does)", err, r.o.NodeDir)
		}
	}
	return nil
}

// build fills in the binaries that Options does not name.
func (r *run) build() error {
	var errs []error
	for _, b := range []struct {
		path *string
		pkg  string
		root bool // in mcpmux's own module, built in its folder with its go.mod
	}{
		{&r.o.Mcpmux, "./cmd/mcpmux", true},
		{&r.o.Echoserver, "github.com/mcpmux/mcpmux/integration/bench/echoserver", false},
		{&r.o.Relay, "github.com/mcpmux/mcpmux/integration/bench/relay", false},
		{&r.o.Bridge, "github.com/mcpmux/mcpmux/integration/bench/bridge", false},
		{&r.o.HTTPRelay, "github.com/mcpmux/mcpmux/integration/bench/httprelay", false},
	} {
		if *b.path != "" {
			continue
		}
		out, err := goBuild(r.ctx, r.dir, b.pkg, b.root)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*b.path = out
	}
	return errors.Join(errs...)
}

// goBuild builds pkg into dir and returns the binary's path. root says pkg
// is in mcpmux's own module, built in its folder with its go.mod. Every
// binary is built without cgo, as the README installs mcpmux and as the
// release archives are built: static, so a process starts without the
// dynamic loader, as users' do.
func goBuild(ctx context.Context, dir, pkg string, root bool) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on PATH (%w): the benchmarks build mcpmux and two helpers", err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if root {
		if cmd.Dir, err = RepoRoot(ctx); err != nil {
			return "", err
		}
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

// RepoRoot returns the repository's root: the folder of mcpmux's own module,
// which the integration module replaces with its parent folder. It asks the
// go command, so it works from any folder inside the integration module.
// mcpmux is built there, with the main module's go.mod, so that the binary
// measured and tested has the dependencies a user's build gets.
func RepoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/mcpmux/mcpmux").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(exit.Stderr))
		}
		return "", fmt.Errorf("go list -m github.com/mcpmux/mcpmux (run it inside the integration module): %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("go list -m github.com/mcpmux/mcpmux: no folder")
	}
	return dir, nil
}

func machine(node string) Machine {
	m := Machine{Go: runtime.Version(), CPUs: runtime.NumCPU(), Date: time.Now().UTC(), Uname: "unknown", Node: "unknown"}
	if out, err := exec.Command("uname", "-a").Output(); err == nil {
		m.Uname = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command(node, "--version").Output(); err == nil {
		m.Node = strings.TrimSpace(string(out))
	}
	return m
}

// raiseOpenFiles raises our soft open-file limit to need, if it is lower
// (Go raises it to the hard limit at start already). The processes we start
// get the limit we started with; mcpmux and node raise their own.
func raiseOpenFiles(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= uint64(need) {
		return nil
	}
	if lim.Max < uint64(need) {
		return fmt.Errorf("the hard open-file limit is %d; the benchmarks need %d (raise it: ulimit -Hn)", lim.Max, need)
	}
	lim.Cur = uint64(need)
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

// tracker holds every open session, so that the end of Run's ctx can close
// them and so unblock whatever waits on them.
type tracker struct {
	mu     sync.Mutex
	open   map[conn]struct{}
	closed bool
	done   chan struct{} // closed when closeAll is over
}

func (t *tracker) init() {
	t.open = make(map[conn]struct{})
	t.done = make(chan struct{})
}

// add tracks c, or closes it if the run is over.
func (t *tracker) add(c conn) (conn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.Join(errors.New("run cancelled"), c.Close())
	}
	t.open[c] = struct{}{}
	t.mu.Unlock()
	return &tracked{conn: c, t: t}, nil
}

func (t *tracker) closeAll() {
	defer close(t.done)
	t.mu.Lock()
	t.closed = true
	all := make([]conn, 0, len(t.open))
	for c := range t.open {
		all = append(all, c)
	}
	t.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
}

type tracked struct {
	conn
	t *tracker
}

func (c *tracked) Close() error {
	c.t.mu.Lock()
	delete(c.t.open, c.conn)
	c.t.mu.Unlock()
	return c.conn.Close()
}

// dial opens a session with open and tracks it.
func (r *run) dial(open func() (conn, error)) (*client, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	c, err := open()
	if err != nil {
		return nil, err
	}
	c, err = r.track.add(c)
	if err != nil {
		return nil, err
	}
	return &client{conn: c}, nil
}

// closeAll closes every client at once and waits.
func closeAll(clients []*client) error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { errs[i] = c.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
