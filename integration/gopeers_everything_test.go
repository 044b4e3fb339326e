package integration

import (
	"context"
	"encoding/json"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGoPeersEverything: the Go peers against the reference server the
// npm tier uses, server-everything, shared by mcpmux: the go-sdk Client
// over the Unix socket (IOTransport) and through `mcpmux connect`
// (CommandTransport), and mcp-go's Client over the socket. Each lists the
// tools and calls echo; what is asserted is what crossed the wire: the
// tools/list answer names server-everything's tools, and the echo's answer,
// under the client's own id, carries "Echo: " and the client's own text.
// All three are sessions of one server process.
func TestGoPeersEverything(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	d := startDaemon(t, rw.server("everything", rwEverything, []string{"stdio"}, rwFast, rwURLElicitation), "")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	// onWire checks, on the messages one client sent and received, the
	// answers to its tools/list and to its tools/call of echo.
	onWire := func(t *testing.T, wire *gpWire, text string) {
		t.Helper()
		var tl struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		ans, ok := wire.answer(wire.request(t, "tools/list").ID)
		require.True(t, ok, "tools/list got no answer:\n%s", wire.dump())
		require.NoError(t, json.Unmarshal(ans.Result, &tl), "tools/list: %s", ans.Raw)
		var names []string
		for _, tool := range tl.Tools {
			names = append(names, tool.Name)
		}
		assert.Subset(t, names, everythingTools, "the tools on the wire")

		call := wire.request(t, "tools/call")
		var cp struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		require.NoError(t, json.Unmarshal(call.Params, &cp))
		require.Equal(t, "echo", cp.Name)
		ans, ok = wire.answer(call.ID)
		require.True(t, ok, "tools/call got no answer under its id %s:\n%s", call.ID, wire.dump())
		var res struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		require.NoError(t, json.Unmarshal(ans.Result, &res), "tools/call: %s", ans.Raw)
		require.Len(t, res.Content, 1, "tools/call: %s", ans.Raw)
		assert.Equal(t, "Echo: "+text, res.Content[0].Text)
	}

	// sdk lists and calls with a go-sdk session and checks its results.
	sdk := func(t *testing.T, cs *mcp.ClientSession, text string) {
		t.Helper()
		tools, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		assert.Subset(t, names, everythingTools)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": text}})
		require.NoError(t, err)
		require.False(t, res.IsError)
		require.Len(t, res.Content, 1)
		tc, ok := res.Content[0].(*mcp.TextContent)
		require.True(t, ok, "content %T", res.Content[0])
		assert.Equal(t, "Echo: "+text, tc.Text)
	}

	t.Run("go-sdk over the socket", func(t *testing.T) {
		cs, wire := gpSocketSession(t, ctx, d.socket("everything"), "gopeer-socket")
		sdk(t, cs, "go-sdk over the socket")
		onWire(t, wire, "go-sdk over the socket")
	})

	t.Run("go-sdk through mcpmux connect", func(t *testing.T) {
		cs, wire, stderr := gpCommandSession(t, ctx, d.path, "everything", "gopeer-command")
		sdk(t, cs, "go-sdk through connect")
		onWire(t, wire, "go-sdk through connect")
		require.NoError(t, cs.Close(), "mcpmux connect exits 0 on stdin EOF; stderr: %s", stderr.String())
		assert.Empty(t, stderr.String(), "mcpmux connect's stderr")
	})

	t.Run("mcp-go over the socket", func(t *testing.T) {
		c, wire := gpMark3labsClient(t, ctx, d.socket("everything"))
		_, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
			ProtocolVersion: mcpgo.LATEST_PROTOCOL_VERSION,
			ClientInfo:      mcpgo.Implementation{Name: "gopeer-mark3labs", Version: "1"},
		}})
		require.NoError(t, err, "mcp-go Initialize through mcpmux")
		tools, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
		require.NoError(t, err)
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		assert.Subset(t, names, everythingTools)
		res, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "mcp-go over the socket"}}})
		require.NoError(t, err)
		require.False(t, res.IsError)
		require.Len(t, res.Content, 1)
		assert.Equal(t, "Echo: mcp-go over the socket", mcpgo.GetTextFromContent(res.Content[0]))
		onWire(t, wire, "mcp-go over the socket")
	})

	// One server process served all three, and never restarted.
	st := gpServerStatus(t, d, "everything")
	assert.Equal(t, "ready", st.State)
	assert.Zero(t, st.Restarts)
	assert.Equal(t, st.Pid, oneProcess(t, d, "everything"), "the one server process, started once")
}
