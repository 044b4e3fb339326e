package integration

// The harness of the Go-peer tier (gopeers_test.go): the go-sdk's
// conformance everything-server, built from the module cache; a wire
// recorder for go-sdk clients (a Transport wrapper) and for mark3labs/mcp-go
// (a net.Conn wrapper); and `mcpmux status --json` as the tier reads it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// gpServerPkg is the go-sdk's conformance server: the fixtures of the
// official conformance suite (test_simple_text, test_tool_with_progress,
// json_schema_2020_12_tool, ...), served over stdio when -http is not given.
// Its version is the go-sdk version in go.mod.
const gpServerPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// gpServerName and gpServerVersion are its serverInfo.
const (
	gpServerName    = "mcp-conformance-test-server"
	gpServerVersion = "1.0.0"
)

// gpProtocol is the version every Go peer ends with: both SDKs first probe
// server/discover (2026-07-28), mcpmux answers -32601, and they fall back to
// initialize with 2025-11-25, which the server speaks too.
const gpProtocol = "2026-07-28"

// gpLegacy is the revision a client that starts with initialize asks for.
const gpLegacy = "2025-11-25"

var gpBuilt struct {
	once sync.Once
	path string
	err  error
}

// needGoPeers skips under -short and returns the path of the conformance
// server, built once per run next to the other test binaries (TestMain's
// temporary folder, removed at the end of the run). A failed build fails
// the test: the module is in go.mod, so only a broken setup can miss it.
func needGoPeers(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the Go-peer tier builds the go-sdk conformance server")
	}
	gpBuilt.once.Do(func() {
		gpBuilt.path = filepath.Join(filepath.Dir(bins.demoserver), "go-sdk-everything-server")
		cmd := exec.Command(bins.goTool, "build", "-o", gpBuilt.path, gpServerPkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			gpBuilt.err = fmt.Errorf("go build %s: %w\n%s", gpServerPkg, err, b)
		}
	})
	require.NoError(t, gpBuilt.err)
	return gpBuilt.path
}

// gpServer is the [servers.NAME] table that runs the conformance server.
func gpServer(name, path string) string {
	return fmt.Sprintf("[servers.%s]\ncommand = %q\n", name, path)
}

// gpMsg is one JSON-RPC message as a peer sent or received it.
type gpMsg struct {
	Out    bool            `json:"-"` // sent by the client
	Raw    string          `json:"-"` // the message's JSON
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (m gpMsg) isRequest() bool  { return m.Method != "" && len(m.ID) > 0 }
func (m gpMsg) isResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// gpWire is what one client sent and received, in order, each direction
// recorded when it was written or read.
type gpWire struct {
	mu   sync.Mutex
	msgs []gpMsg
	bad  []string // frames that were not JSON
}

func (w *gpWire) add(out bool, raw []byte) {
	m := gpMsg{Out: out, Raw: string(raw)}
	err := json.Unmarshal(raw, &m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.bad = append(w.bad, fmt.Sprintf("%q: %v", raw, err))
		return
	}
	w.msgs = append(w.msgs, m)
}

// all returns a copy of the messages so far.
func (w *gpWire) all() []gpMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]gpMsg(nil), w.msgs...)
}

// answer is the received response to the sent request with this id.
func (w *gpWire) answer(id json.RawMessage) (gpMsg, bool) {
	for _, m := range w.all() {
		if !m.Out && m.isResponse() && bytes.Equal(m.ID, id) {
			return m, true
		}
	}
	return gpMsg{}, false
}

// sent returns the requests and notifications the client sent.
func (w *gpWire) sent() []gpMsg {
	var out []gpMsg
	for _, m := range w.all() {
		if m.Out {
			out = append(out, m)
		}
	}
	return out
}

// request returns the first request sent with method.
func (w *gpWire) request(t *testing.T, method string) gpMsg {
	t.Helper()
	for _, m := range w.sent() {
		if m.isRequest() && m.Method == method {
			return m
		}
	}
	t.Fatalf("the client sent no %s request; it sent:\n%s", method, w.dump())
	return gpMsg{}
}

func (w *gpWire) dump() string {
	var b strings.Builder
	for _, m := range w.all() {
		dir := "<-"
		if m.Out {
			dir = "->"
		}
		fmt.Fprintf(&b, "  %s %.300s\n", dir, m.Raw)
	}
	return b.String()
}

// checkHandshake asserts the opening of a Go peer's session on the wire:
// its first message is the 2026-07-28 probe server/discover, which mcpmux
// refuses with -32601 (without forwarding it: the go-sdk server would
// answer it otherwise); then initialize with 2025-11-25, answered with the
// server's info and that version, then notifications/initialized. And
// every request got exactly one answer under its own id, and no answer
// came for an id the client never used.
func (w *gpWire) checkHandshake(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	bad := w.bad
	w.mu.Unlock()
	require.Empty(t, bad, "frames that are not JSON")
	sent := w.sent()
	require.NotEmpty(t, sent)
	require.Equal(t, "server/discover", sent[0].Method, "the first message of the session; the wire:\n%s", w.dump())
	disc, ok := w.answer(sent[0].ID)
	require.True(t, ok, "server/discover got no answer:\n%s", w.dump())
	require.Nil(t, disc.Error, "server/discover is answered from the server's own description: %s", disc.Raw)
	var dr struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Meta              struct {
			ServerInfo struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	require.NoError(t, json.Unmarshal(disc.Result, &dr))
	assert.Contains(t, dr.SupportedVersions, gpProtocol)
	assert.Equal(t, gpServerName, dr.Meta.ServerInfo.Name)
	assert.Equal(t, gpServerVersion, dr.Meta.ServerInfo.Version)
	assert.Contains(t, dr.Capabilities, "tools")

	// The modern revision: no handshake, and every request names its
	// revision in its own envelope.
	for _, m := range sent {
		assert.NotEqual(t, "initialize", m.Method, "a modern client does not initialize:\n%s", w.dump())
		if m.isRequest() {
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			json.Unmarshal(m.Params, &p)
			assert.JSONEq(t, `"`+gpProtocol+`"`, string(p.Meta["io.modelcontextprotocol/protocolVersion"]), "the envelope of %s", m.Raw)
		}
	}

	// One answer per request, under its id; none for ids never sent.
	asked := map[string]int{}
	for _, m := range sent {
		if m.isRequest() && m.Method != "subscriptions/listen" { // a listen is answered when it ends
			asked[string(m.ID)]++
		}
	}
	got := map[string]int{}
	for _, m := range w.all() {
		if m.Out {
			continue
		}
		assert.False(t, m.isRequest(), "no server-to-client request was expected: %s", m.Raw)
		if m.isResponse() {
			got[string(m.ID)]++
			assert.Equal(t, 1, asked[string(m.ID)], "an answer for id %s, which the client sent %d times", m.ID, asked[string(m.ID)])
		}
	}
	for id, n := range asked {
		assert.Equal(t, 1, n, "the client used request id %s more than once", id)
		assert.Equal(t, 1, got[id], "answers for request id %s", id)
	}
}

// gpRecorder is a go-sdk Transport that records every message its
// connection writes and reads (encoded as the SDK puts it on the wire).
type gpRecorder struct {
	mcp.Transport
	wire *gpWire
}

func (r gpRecorder) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &gpRecConn{Connection: c, wire: r.wire}, nil
}

type gpRecConn struct {
	mcp.Connection
	wire *gpWire
}

func (c *gpRecConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		if b, eerr := jsonrpc.EncodeMessage(m); eerr == nil {
			c.wire.add(false, b)
		}
	}
	return m, err
}

// Write records m before it is written: once written, its answer may be
// read (and recorded) before Write returns, and the wire must keep the
// order in which the messages went.
func (c *gpRecConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if b, err := jsonrpc.EncodeMessage(m); err == nil {
		c.wire.add(true, b)
	}
	return c.Connection.Write(ctx, m)
}

// gpTeeConn is a net.Conn that records the lines read and written on it
// (for mark3labs/mcp-go, which takes an io.Reader and an io.WriteCloser).
// A read on the closed connection reports io.EOF, which is what that client
// expects at the end of a stream (it logs any other error).
type gpTeeConn struct {
	net.Conn
	wire    *gpWire
	mu      sync.Mutex
	in, out []byte // the partial lines so far
}

func (c *gpTeeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.feed(false, p[:n])
	if errors.Is(err, net.ErrClosed) {
		err = io.EOF
	}
	return n, err
}

func (c *gpTeeConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.feed(true, p[:n])
	return n, err
}

func (c *gpTeeConn) feed(out bool, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := &c.in
	if out {
		buf = &c.out
	}
	*buf = append(*buf, p...)
	for {
		i := bytes.IndexByte(*buf, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimSpace((*buf)[:i])
		if len(line) > 0 {
			c.wire.add(out, bytes.Clone(line))
		}
		*buf = (*buf)[i+1:]
	}
}

// gpStatus is the part of `mcpmux status --json` the tier reads.
type gpStatus struct {
	Name        string   `json:"name"`
	State       string   `json:"state"`
	Pid         int      `json:"pid"`
	Restarts    int      `json:"restarts"`
	Sessions    int      `json:"sessions"`
	LastExit    string   `json:"last_exit"`
	Stderr      []string `json:"stderr"`
	SessionList []struct {
		Transport string `json:"transport"`
		Client    string `json:"client"`
		Protocol  string `json:"protocol"`
	} `json:"session_list"`
}

// gpServerStatus runs `mcpmux status --json` and returns server name's part.
func gpServerStatus(t *testing.T, d *daemon, name string) gpStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
	require.NoError(t, err, "mcpmux status --json")
	var st struct {
		Servers []gpStatus `json:"servers"`
	}
	require.NoError(t, json.Unmarshal(out, &st), "status: %s", out)
	for _, s := range st.Servers {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("mcpmux status lists no server %s: %s", name, out)
	return gpStatus{}
}

// gpCheckLog asserts that the daemon logged no warning or error, and started
// server name exactly once (no restart, no second process).
func gpCheckLog(t *testing.T, d *daemon, name string) {
	t.Helper()
	var started, ready int
	sc := bufio.NewScanner(strings.NewReader(d.log()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		assert.NotRegexp(t, `level=(WARN|ERROR)`, line, "the daemon logged a problem")
		if !strings.Contains(line, "server="+name+" ") {
			continue
		}
		switch {
		case strings.Contains(line, `msg="server started"`):
			started++
		case strings.Contains(line, `msg="server ready"`):
			ready++
			assert.Contains(t, line, "name="+gpServerName)
		case strings.Contains(line, `msg="server stderr"`):
			t.Errorf("the server wrote to its stderr: %s", line)
		}
	}
	assert.Equal(t, 1, started, "server %s starts in the daemon log", name)
	assert.Equal(t, 1, ready, "server %s readiness in the daemon log", name)
}

// gpText is the text of a go-sdk CallToolResult's single text content.
func gpText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.False(t, res.IsError, "the tool failed: %+v", res.Content)
	require.Len(t, res.Content, 1)
	tc, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content %T", res.Content[0])
	return tc.Text
}

// gpSocketSession connects a go-sdk Client called name over IOTransport on
// the Unix socket at path, recording its wire. The session and the
// connection are closed at the end of the test, if the test has not.
func gpSocketSession(t *testing.T, ctx context.Context, path, name string) (*mcp.ClientSession, *gpWire) {
	t.Helper()
	conn, err := net.DialTimeout("unix", path, ioTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	wire := &gpWire{}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	cs, err := client.Connect(ctx, gpRecorder{&mcp.IOTransport{Reader: conn, Writer: conn}, wire}, nil)
	require.NoError(t, err, "go-sdk Connect through mcpmux")
	t.Cleanup(func() { cs.Close() })
	return cs, wire
}

// gpCommandSession connects a go-sdk Client called name with
// CommandTransport spawning `mcpmux connect --config CFG server`, as an
// editor would, recording its wire and the bridge's stderr. The session is
// closed at the end of the test, if the test has not.
func gpCommandSession(t *testing.T, ctx context.Context, cfg, server, name string) (*mcp.ClientSession, *gpWire, *testutil.Buffer) {
	t.Helper()
	cmd := mcpmux(ctx, "connect", "--config", cfg, server)
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	wire := &gpWire{}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	cs, err := client.Connect(ctx, gpRecorder{&mcp.CommandTransport{Command: cmd}, wire}, nil)
	require.NoError(t, err, "go-sdk Connect through mcpmux connect")
	t.Cleanup(func() { cs.Close() })
	return cs, wire, stderr
}

// gpMark3labsClient starts a mark3labs/mcp-go Client over the Unix socket at
// path (transport.NewIO on a net.Conn whose traffic the wire records), not
// yet initialized. It is closed at the end of the test, if the test has not.
func gpMark3labsClient(t *testing.T, ctx context.Context, path string) (*mcpclient.Client, *gpWire) {
	t.Helper()
	conn, err := net.DialTimeout("unix", path, ioTimeout)
	require.NoError(t, err)
	wire := &gpWire{}
	tee := &gpTeeConn{Conn: conn, wire: wire}
	t.Cleanup(func() { tee.Close() })
	c := mcpclient.NewClient(transport.NewIO(tee, tee, nil))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { c.Close() })
	return c, wire
}
