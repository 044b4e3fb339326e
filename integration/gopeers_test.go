package integration

// The Go-peer tier: real Go MCP implementations from the Go module proxy on
// both sides of mcpmux. The server is the go-sdk's conformance
// everything-server (the fixtures of the official conformance suite, over
// stdio), built from the module cache; the clients are the go-sdk's own
// Client (over the Unix socket with IOTransport, and spawning `mcpmux
// connect` with CommandTransport) and mark3labs/mcp-go's Client (over the
// Unix socket with transport.NewIO). Every session is recorded on the wire
// and checked there as well as through the SDKs' results. See
// gopeers_helpers_test.go for the harness.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// gpTools are fixtures of the conformance server the tests rely on (it has
// more).
var gpTools = []string{
	"test_simple_text", "test_tool_with_progress", "test_error_handling",
	"json_schema_2020_12_tool", "test_sampling", "test_elicitation",
}

const (
	gpSimpleText = "This is a simple text response for testing."
	gpSchemaTool = "json_schema_2020_12_tool"
	gpEchoPrefix = "JSON Schema 2020-12 tool called with: "
)

// gpEchoArgs are arguments that json_schema_2020_12_tool accepts (its
// schema wants an email when contactMethod is not phone); it answers with
// them, as it received them.
func gpEchoArgs(name string) map[string]any {
	return map[string]any{"name": name, "contactMethod": "email", "email": "peer@example.com"}
}

// gpExercise drives one go-sdk session: the initialize result, the tool list
// (and one 2020-12 input schema byte-level intact on the wire), a fixed-text
// tool, an echo of the client's own arguments, and a tool error.
func gpExercise(t *testing.T, ctx context.Context, cs *mcp.ClientSession, wire *gpWire, who string) {
	t.Helper()
	init := cs.InitializeResult()
	require.NotNil(t, init)
	assert.Equal(t, gpServerName, init.ServerInfo.Name)
	assert.Equal(t, gpProtocol, init.ProtocolVersion, "the go-sdk client speaks 2026-07-28 through mcpmux")

	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err, "tools/list")
		names = append(names, tool.Name)
	}
	assert.Subset(t, names, gpTools)
	gpCheckSchema(t, wire)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
	require.NoError(t, err)
	assert.Equal(t, gpSimpleText, gpText(t, res))

	args := gpEchoArgs("go-sdk " + who)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: gpSchemaTool, Arguments: args})
	require.NoError(t, err)
	gpCheckEcho(t, gpText(t, res), args)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_error_handling"})
	require.NoError(t, err, "a tool error is a result, not a JSON-RPC error")
	assert.True(t, res.IsError)
	if assert.Len(t, res.Content, 1) {
		if tc, ok := res.Content[0].(*mcp.TextContent); assert.True(t, ok) {
			assert.Contains(t, tc.Text, "intentionally returns an error")
		}
	}

	wire.checkHandshake(t)
}

// gpCheckEcho checks json_schema_2020_12_tool's answer: the arguments the
// server received are exactly the client's.
func gpCheckEcho(t *testing.T, text string, args map[string]any) {
	t.Helper()
	got, ok := strings.CutPrefix(text, gpEchoPrefix)
	require.True(t, ok, "answer %q", text)
	want, err := json.Marshal(args)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), got, "the arguments as the server received them")
}

// gpCheckSchema reads the tools/list answer off the wire and checks that the
// 2020-12 schema of json_schema_2020_12_tool came through whole: $schema,
// $defs with $anchor, allOf/anyOf, if/then/else, additionalProperties.
func gpCheckSchema(t *testing.T, wire *gpWire) {
	t.Helper()
	list := wire.request(t, "tools/list")
	ans, ok := wire.answer(list.ID)
	require.True(t, ok, "tools/list got no answer")
	var r struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(ans.Result, &r), "tools/list: %.500s", ans.Raw)
	for _, tool := range r.Tools {
		if tool.Name != gpSchemaTool {
			continue
		}
		var s struct {
			Schema string `json:"$schema"`
			Defs   map[string]struct {
				Anchor string `json:"$anchor"`
			} `json:"$defs"`
			AllOf      []json.RawMessage `json:"allOf"`
			If         json.RawMessage   `json:"if"`
			Then       json.RawMessage   `json:"then"`
			Else       json.RawMessage   `json:"else"`
			Additional *bool             `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(tool.InputSchema, &s))
		assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", s.Schema)
		assert.Equal(t, "addressDef", s.Defs["address"].Anchor)
		assert.Len(t, s.AllOf, 1)
		assert.NotEmpty(t, s.If)
		assert.NotEmpty(t, s.Then)
		assert.NotEmpty(t, s.Else)
		if assert.NotNil(t, s.Additional) {
			assert.False(t, *s.Additional)
		}
		return
	}
	t.Fatalf("tools/list has no %s", gpSchemaTool)
}

// gpSession finds the session of clientInfo.name client in the status.
func gpSession(t *testing.T, st gpStatus, client string) (transport, protocol string) {
	t.Helper()
	for _, s := range st.SessionList {
		if s.Client == client {
			return s.Transport, s.Protocol
		}
	}
	t.Fatalf("status lists no session of client %s: %+v", client, st.SessionList)
	return "", ""
}

// TestGoPeersSDKSocket: the go-sdk Client with IOTransport over a net.Conn
// to the server's Unix socket, through mcpmux to the go-sdk conformance
// server.
func TestGoPeersSDKSocket(t *testing.T) {
	t.Parallel()
	srv := needGoPeers(t)
	d := startDaemon(t, gpServer("conf", srv), "")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	cs, wire := gpSocketSession(t, ctx, d.socket("conf"), "gopeer-socket")
	gpExercise(t, ctx, cs, wire, "over the socket")

	st := gpServerStatus(t, d, "conf")
	transport, protocol := gpSession(t, st, "gopeer-socket")
	assert.Equal(t, "unix", transport)
	assert.Equal(t, gpProtocol, protocol)
	assert.Zero(t, st.Restarts)

	cs.Close()
	testutil.Eventually(t, 5*time.Second, "the session ends when the go-sdk client closes", func() (bool, error) {
		return gpServerStatus(t, d, "conf").Sessions == 0, nil
	})
	gpCheckLog(t, d, "conf")
}

// TestGoPeersSDKCommand: the go-sdk Client with CommandTransport spawning
// `mcpmux connect --config CFG conf`, as an editor would. Closing the
// session closes the bridge's stdin; the bridge must exit 0 at once, with
// nothing on its stderr, well before CommandTransport's 5 s SIGTERM.
func TestGoPeersSDKCommand(t *testing.T) {
	t.Parallel()
	srv := needGoPeers(t)
	d := startDaemon(t, gpServer("conf", srv), "")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	cs, wire, stderr := gpCommandSession(t, ctx, d.path, "conf", "gopeer-command")
	gpExercise(t, ctx, cs, wire, "over mcpmux connect")

	st := gpServerStatus(t, d, "conf")
	_, protocol := gpSession(t, st, "gopeer-command")
	assert.Equal(t, gpProtocol, protocol)
	assert.Zero(t, st.Restarts)

	start := time.Now()
	require.NoError(t, cs.Close(), "mcpmux connect must exit 0 on stdin EOF; stderr: %s", stderr.String())
	assert.Less(t, time.Since(start), 4*time.Second, "mcpmux connect took this long to exit after stdin EOF")
	assert.Empty(t, stderr.String(), "mcpmux connect's stderr")
	testutil.Eventually(t, 5*time.Second, "the bridge's session ends", func() (bool, error) {
		return gpServerStatus(t, d, "conf").Sessions == 0, nil
	})
	gpCheckLog(t, d, "conf")
}

// TestGoPeersMark3labsSocket: mark3labs/mcp-go's Client over the Unix
// socket (transport.NewIO on a net.Conn): its server/discover probe,
// the fallback initialize, the tool list and two calls.
func TestGoPeersMark3labsSocket(t *testing.T) {
	t.Parallel()
	srv := needGoPeers(t)
	d := startDaemon(t, gpServer("conf", srv), "")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	c, wire := gpMark3labsClient(t, ctx, d.socket("conf"))
	init, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
		ProtocolVersion: mcpgo.LATEST_PROTOCOL_VERSION,
		ClientInfo:      mcpgo.Implementation{Name: "gopeer-mark3labs", Version: "1"},
	}})
	require.NoError(t, err, "mcp-go Initialize through mcpmux")
	assert.Equal(t, gpServerName, init.ServerInfo.Name)
	assert.Equal(t, gpProtocol, init.ProtocolVersion)
	assert.Equal(t, gpProtocol, c.ProtocolVersion())

	tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	assert.Subset(t, names, gpTools)
	gpCheckSchema(t, wire)

	res, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "test_simple_text"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Len(t, res.Content, 1)
	assert.Equal(t, gpSimpleText, mcpgo.GetTextFromContent(res.Content[0]))

	args := gpEchoArgs("mark3labs over the socket")
	res, err = c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: gpSchemaTool, Arguments: args}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	require.Len(t, res.Content, 1)
	gpCheckEcho(t, mcpgo.GetTextFromContent(res.Content[0]), args)

	wire.checkHandshake(t)
	st := gpServerStatus(t, d, "conf")
	transportName, protocol := gpSession(t, st, "gopeer-mark3labs")
	assert.Equal(t, "unix", transportName)
	assert.Equal(t, gpProtocol, protocol)
	assert.Zero(t, st.Restarts)

	require.NoError(t, c.Close())
	testutil.Eventually(t, 5*time.Second, "the session ends when the mcp-go client closes", func() (bool, error) {
		return gpServerStatus(t, d, "conf").Sessions == 0, nil
	})
	gpCheckLog(t, d, "conf")
}

// TestGoPeersShareOneServer: three go-sdk clients at once on one
// conformance server. The go-sdk server refuses a second initialize on its
// connection (checked first, on the server alone) and mcpmux initialized it
// already, so any initialize mcpmux forwarded would fail that client's
// Connect: all three succeeding proves none reached it. The three then use
// the same progress token at the same time; each gets its own three
// notifications, under its own token, and the server saw three different
// tokens. Status shows one process, never restarted, with three sessions;
// the daemon log shows one start and no warning.
func TestGoPeersShareOneServer(t *testing.T) {
	t.Parallel()
	srv := needGoPeers(t)
	gpCheckRejectsSecondInitialize(t, srv)

	d := startDaemon(t, gpServer("conf", srv), "")
	var before gpStatus
	testutil.Eventually(t, readyTimeout, "the server is ready", func() (bool, error) {
		before = gpServerStatus(t, d, "conf")
		return before.State == "ready", fmt.Errorf("state %s", before.State)
	})
	require.NotZero(t, before.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	const n = 3
	type peer struct {
		name  string
		wire  *gpWire
		cs    *mcp.ClientSession
		mu    sync.Mutex
		progs []*mcp.ProgressNotificationParams
	}
	peers := make([]*peer, n)
	for i := range peers {
		p := &peer{name: fmt.Sprintf("gopeer-%d", i+1), wire: &gpWire{}}
		peers[i] = p
	}

	// All three connect at once.
	go1 := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() {
			<-go1
			conn, err := net.DialTimeout("unix", d.socket("conf"), ioTimeout)
			if err != nil {
				errs[i] = err
				return
			}
			client := mcp.NewClient(&mcp.Implementation{Name: p.name, Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					p.mu.Lock()
					defer p.mu.Unlock()
					p.progs = append(p.progs, req.Params)
				},
			})
			p.cs, errs[i] = client.Connect(ctx, gpRecorder{&mcp.IOTransport{Reader: conn, Writer: conn}, p.wire}, nil)
			if errs[i] != nil {
				conn.Close()
			}
		})
	}
	close(go1)
	wg.Wait()
	for _, p := range peers {
		if p.cs != nil {
			defer p.cs.Close()
		}
	}
	for i, err := range errs {
		require.NoError(t, err, "Connect of %s (a forwarded initialize would fail with \"duplicate initialize\")", peers[i].name)
	}
	for _, p := range peers {
		init := p.cs.InitializeResult()
		assert.Equal(t, gpServerName, init.ServerInfo.Name, p.name)
		assert.Equal(t, gpProtocol, init.ProtocolVersion, p.name)
	}

	// The same progress token from all three at once, and an echo each.
	const token = "p"
	seen := make([]string, n)
	texts := make([]string, n)
	callErrs := make([]error, 2*n)
	for i, p := range peers {
		wg.Go(func() {
			params := &mcp.CallToolParams{Name: "test_tool_with_progress"}
			params.SetProgressToken(token)
			res, err := p.cs.CallTool(ctx, params)
			if err == nil && (res.IsError || len(res.Content) != 1) {
				err = fmt.Errorf("result %+v", res)
			}
			if callErrs[2*i] = err; err == nil {
				if tc, ok := res.Content[0].(*mcp.TextContent); ok {
					seen[i] = tc.Text
				}
			}
		})
		wg.Go(func() {
			res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: gpSchemaTool, Arguments: gpEchoArgs(p.name)})
			if err == nil && (res.IsError || len(res.Content) != 1) {
				err = fmt.Errorf("result %+v", res)
			}
			if callErrs[2*i+1] = err; err == nil {
				if tc, ok := res.Content[0].(*mcp.TextContent); ok {
					texts[i] = tc.Text
				}
			}
		})
	}
	wg.Wait()
	for i, err := range callErrs {
		require.NoError(t, err, "call %d of %s", i%2, peers[i/2].name)
	}
	for i, p := range peers {
		gpCheckEcho(t, texts[i], gpEchoArgs(p.name))
		assert.NotEmpty(t, seen[i], "%s: the token the server saw", p.name)
		assert.NotEqual(t, token, seen[i], "%s: the server saw the client's own token, so the three would collide", p.name)
	}
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(seen))), n, "the server must see %d different progress tokens: %q", n, seen)
	for _, p := range peers {
		testutil.Eventually(t, 5*time.Second, p.name+" gets its three progress notifications", func() (bool, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.progs) >= 3, fmt.Errorf("%d so far", len(p.progs))
		})
	}
	time.Sleep(50 * time.Millisecond) // room for a stray fourth one, which must not come
	for _, p := range peers {
		p.mu.Lock()
		progs := slices.Clone(p.progs)
		p.mu.Unlock()
		require.Len(t, progs, 3, "%s: progress notifications (exactly its own)", p.name)
		for j, pr := range progs {
			assert.Equal(t, token, fmt.Sprint(pr.ProgressToken), "%s: progress under its own token", p.name)
			assert.Equal(t, float64(50*j), pr.Progress, "%s: progress %d", p.name, j)
			assert.Equal(t, float64(100), pr.Total)
		}
		p.wire.checkHandshake(t)
	}

	// One process, never restarted, three sessions, each with its name.
	st := gpServerStatus(t, d, "conf")
	assert.Equal(t, "ready", st.State)
	assert.Equal(t, before.Pid, st.Pid, "the one server process")
	assert.Zero(t, st.Restarts)
	assert.Equal(t, n, st.Sessions)
	assert.Empty(t, st.LastExit)
	assert.Empty(t, st.Stderr, "the server's stderr (the go-sdk server logs a duplicate initialize only to a configured logger, so this is a plain sanity check)")
	for _, p := range peers {
		_, protocol := gpSession(t, st, p.name)
		assert.Equal(t, gpProtocol, protocol, p.name)
	}
	initialized := strings.Count(d.log(), `msg="session initialized" server=conf `)
	assert.Equal(t, n, initialized, "sessions initialized, in the daemon log")

	for _, p := range peers {
		p.cs.Close()
	}
	testutil.Eventually(t, 5*time.Second, "every session ends", func() (bool, error) {
		return gpServerStatus(t, d, "conf").Sessions == 0, nil
	})
	after := gpServerStatus(t, d, "conf")
	assert.Equal(t, before.Pid, after.Pid, "the server outlives its sessions")
	assert.Zero(t, after.Restarts)
	gpCheckLog(t, d, "conf")
}

// gpCheckRejectsSecondInitialize is the control of TestGoPeersShareOneServer:
// run alone, the conformance server answers a first initialize and refuses
// a second one on the same connection.
func gpCheckRejectsSecondInitialize(t *testing.T, srv string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, srv)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Wait()
	defer stdin.Close()

	initialize := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"control","version":"1"}}}`+"\n", id, gpLegacy)
	}
	// The second is sent only after the first is answered: the server
	// handles initialize in order anyway, but this makes the control exact.
	r := bufio.NewReader(stdout)
	var answers []gpMsg
	for id := 1; id <= 2; id++ {
		_, err := io.WriteString(stdin, initialize(id))
		require.NoError(t, err)
		line, err := r.ReadBytes('\n')
		require.NoError(t, err, "the conformance server's answer to initialize %d", id)
		var m gpMsg
		require.NoError(t, json.Unmarshal(line, &m), "%s", line)
		m.Raw = string(line)
		answers = append(answers, m)
	}
	assert.Nil(t, answers[0].Error, "first initialize: %s", answers[0].Raw)
	if assert.NotNil(t, answers[1].Error, "second initialize: %s", answers[1].Raw) {
		assert.Contains(t, answers[1].Error.Message, "duplicate")
	}
}
