package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestEndpointAllThroughConnect: `mcpmux connect` with no name reaches the
// endpoint all, which holds three demo servers: their tools are listed
// with prefixes, each is called through its prefix and reaches its own
// process, a tool the view hides is absent and refused without reaching
// its server, and an unknown prefix is refused naming the servers.
func TestEndpointAllThroughConnect(t *testing.T) {
	t.Parallel()
	servers := demo("alpha", nil) + demo("beta", nil) + demo("gamma", nil) +
		"[endpoints.all]\nservers = [\"alpha\", \"beta\", \"gamma\"]\ndeny_tools = [\"beta__crash\", \"*__junk\"]\n"
	d := startDaemon(t, servers, "")
	b := startBridge(t, nil, "--config", d.path)

	b.send(request(`"init"`, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "integration", "version": "1"},
	}))
	m, _ := b.await(`"init"`)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "initialize: %s", m.Frame)
	var init struct {
		ServerInfo struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(m.Result, &init))
	assert.Equal(t, "mcpmux", init.ServerInfo.Name, "the endpoint's own description")
	for _, c := range []string{"tools", "resources", "prompts", "logging"} {
		assert.Contains(t, init.Capabilities, c, "the union of the demo servers' capabilities")
	}
	b.send(notification("notifications/initialized", nil))

	b.send(request(`1`, "tools/list", nil))
	m, _ = b.await(`1`)
	tools := toolNames(t, m)
	for _, s := range []string{"alpha", "beta", "gamma"} {
		assert.Contains(t, tools, s+"__echo")
		assert.Contains(t, tools, s+"__stats")
		assert.NotContains(t, tools, s+"__junk", "hidden by *__junk")
	}
	assert.Contains(t, tools, "alpha__crash")
	assert.NotContains(t, tools, "beta__crash", "hidden by the view")

	// Each server through its prefix: its own process answers.
	stats := func(id, server string) demoStats {
		t.Helper()
		b.send(toolCall(id, server+"__stats", nil))
		m, _ := b.await(id)
		var st demoStats
		require.NoError(t, decodeStructured(m, &st), "%s__stats", server)
		return st
	}
	pids := map[int]string{}
	for i, s := range []string{"alpha", "beta", "gamma"} {
		id := fmt.Sprint(10 + i)
		b.send(toolCall(id, s+"__echo", map[string]string{"text": "hi " + s}))
		m, _ := b.await(id)
		text, err := resultText(m)
		require.NoError(t, err, "%s__echo", s)
		assert.Equal(t, "hi "+s, text)
		pids[stats(fmt.Sprint(20+i), s).PID] = s
	}
	assert.Len(t, pids, 3, "three processes, one per server")

	// The hidden tool is refused, and beta never sees the call: between
	// two of its stats calls it received nothing else, and it is still
	// the same process (crash would have ended it).
	before := stats(`30`, "beta")
	b.send(toolCall(`31`, "beta__crash", nil))
	m, _ = b.await(`31`)
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, jsonrpc.CodeInvalidParams, e.Code)
	assert.Equal(t, jsonrpc.ReasonUnknownTool, e.Data.Reason)
	after := stats(`32`, "beta")
	assert.Equal(t, before.PID, after.PID, "beta still runs")
	assert.Equal(t, before.Requests+1, after.Requests, "beta received only the second stats call")

	b.send(toolCall(`40`, "delta__echo", map[string]string{"text": "x"}))
	m, _ = b.await(`40`)
	e, err = errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, jsonrpc.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "alpha, beta, gamma", "the unknown prefix's error names the endpoint's servers")

	// status --json lists the endpoint.
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
	require.NoError(t, err, "mcpmux status --json")
	var st struct {
		Endpoints []struct {
			Name     string   `json:"name"`
			Servers  []string `json:"servers"`
			Sessions int      `json:"sessions"`
		} `json:"endpoints"`
	}
	require.NoError(t, json.Unmarshal(out, &st), "status: %s", out)
	require.Len(t, st.Endpoints, 1, "status: %s", out)
	assert.Equal(t, "all", st.Endpoints[0].Name)
	assert.Equal(t, []string{"alpha", "beta", "gamma"}, st.Endpoints[0].Servers)
	assert.Equal(t, 1, st.Endpoints[0].Sessions)
}

// TestEndpointOverHTTP: Streamable HTTP at /mcp reaches the endpoint all;
// a call through a prefix is answered on its POST's stream, with its
// progress there too.
func TestEndpointOverHTTP(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("alpha", nil)+demo("beta", nil), wsListen)
	c := newHTTPClient(t, d, "all")
	c.url = "http://" + d.webAddr() + "/mcp"
	sid := c.initialize(t)

	evs := c.call(t, sid, request(`1`, "tools/list", nil))
	last := evs[len(evs)-1].msg
	require.Equal(t, jsonrpc.KindResult, last.Kind, "tools/list: %s", last.Frame)
	assert.Contains(t, string(last.Result), `"alpha__echo"`)
	assert.Contains(t, string(last.Result), `"beta__echo"`)

	evs = c.call(t, sid, request(`2`, "tools/call", map[string]any{"name": "beta__slow",
		"arguments": map[string]any{"ms": 30, "steps": 2}, "_meta": map[string]any{"progressToken": "p"}}))
	last = evs[len(evs)-1].msg
	require.Equal(t, jsonrpc.KindResult, last.Kind, "beta__slow: %s", last.Frame)
	assert.Equal(t, "2", string(last.ID))
	var progress int
	for _, e := range evs[:len(evs)-1] {
		if e.msg.Method == "notifications/progress" {
			progress++
		}
	}
	assert.Equal(t, 2, progress, "the call's progress on its own stream")
}

// TestEndpointGoSDK: the go-sdk client through the endpoint all, to the
// go-sdk conformance server and the demo server: the tools of both,
// prefixed, each called through its prefix.
func TestEndpointGoSDK(t *testing.T) {
	t.Parallel()
	srv := needGoPeers(t)
	d := startDaemon(t, gpServer("conf", srv)+demo("demo", nil), "")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cs, _ := gpSocketSession(t, ctx, d.socket("all"), "gopeer-endpoint")
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err, "tools/list")
		names = append(names, tool.Name)
	}
	assert.Contains(t, names, "conf__test_simple_text")
	assert.Contains(t, names, "demo__echo")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "conf__test_simple_text"})
	require.NoError(t, err)
	assert.Equal(t, gpSimpleText, gpText(t, res))
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"text": "hi"}})
	require.NoError(t, err)
	assert.Equal(t, "hi", gpText(t, res))
}
