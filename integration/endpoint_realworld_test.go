package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endpointReport is what node/endpoint.mjs prints.
type endpointReport struct {
	Instructions string                     `json:"instructions"`
	Capabilities map[string]json.RawMessage `json:"capabilities"`
	Tools        []string                   `json:"tools"`
	Everything   string                     `json:"everything"`
	Memory       string                     `json:"memory"`
	Demo         string                     `json:"demo"`
	Hidden       struct {
		Code int `json:"code"`
		Data struct {
			Reason string `json:"reason"`
		} `json:"data"`
		Message  string          `json:"message"`
		Resolved json.RawMessage `json:"resolved"`
	} `json:"hidden"`
	DemoRequests struct{ Before, After int } `json:"demoRequests"`
	Asked        string                      `json:"asked"`
	ListChanged  int                         `json:"listChanged"`
	Resources    int                         `json:"resources"`
	Read         []struct {
		URI      string `json:"uri"`
		Contents int    `json:"contents"`
	} `json:"read"`
}

// TestRealWorldEndpoint: the TypeScript SDK's client reaches three servers
// at once through one entry, `mcpmux connect` with no name and Streamable
// HTTP at /mcp: server-everything, server-memory and the demo server, each
// still one shared process. Each server's tool is called through its
// prefix; a tool the endpoint hides is refused and never reaches its
// server; the demo server's sampling request reaches this client; its
// list_changed reaches it once; every resource listed is read and
// subscribed. The TypeScript SDK v2 client, pinned to 2026-07-28, does the
// same calls on the same endpoint.
func TestRealWorldEndpoint(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	const hidden = "demo__add"
	cfg := rw.server("everything", rwEverything, []string{"stdio"}, rwFast) +
		rw.server("memory", rwMemory, nil, `env = { MEMORY_FILE_PATH = "`+t.TempDir()+`/memory.jsonl" }`, "max_concurrency = 1") +
		demo("demo", nil) +
		"[endpoints.all]\nservers = [\"everything\", \"memory\", \"demo\"]\ndeny_tools = [\"" + hidden + "\"]\n"
	d := startDaemon(t, cfg, rwListen)
	http := httpTarget(d, "all", rwToken, true)
	http["url"] = "http://" + rwWebAddr(d) + "/mcp"
	for _, tc := range []struct {
		name   string
		target map[string]any
	}{
		{"connect", connectTarget(d, "")},
		{"http", http},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r endpointReport
			sampled := "sampled for " + tc.name
			rw.runScript(t, "endpoint.mjs", map[string]any{"target": tc.target, "hidden": hidden, "sampled": sampled}, &r, nil)

			t.Logf("%s: %d tools, %d resources (read %d), list_changed %d, demo requests %d -> %d, hidden: %d %s", tc.name, len(r.Tools), r.Resources, len(r.Read), r.ListChanged, r.DemoRequests.Before, r.DemoRequests.After, r.Hidden.Code, r.Hidden.Message)
			assert.Contains(t, r.Tools, "everything__echo")
			assert.Contains(t, r.Tools, "memory__read_graph")
			assert.Contains(t, r.Tools, "demo__echo")
			assert.NotContains(t, r.Tools, hidden, "the hidden tool is not listed")
			for _, name := range r.Tools {
				assert.Regexp(t, `^(everything|memory|demo)__`, name, "every tool is prefixed")
			}
			assert.Contains(t, r.Everything, "to everything")
			assert.Contains(t, r.Memory, "entities")
			assert.Equal(t, "to demo", r.Demo)

			assert.Equal(t, -32602, r.Hidden.Code, "the hidden tool is refused: %+v", r.Hidden)
			assert.Equal(t, "unknown_tool", r.Hidden.Data.Reason)
			assert.Empty(t, r.Hidden.Resolved)
			assert.Equal(t, r.DemoRequests.Before+1, r.DemoRequests.After, "between two stats calls the demo server saw only the second: the hidden call never reached it")

			assert.Contains(t, r.Asked, sampled, "the demo server's sampling request reached this client")
			assert.Equal(t, 1, r.ListChanged, "one server's list_changed reaches the client once")

			assert.Positive(t, r.Resources, "server-everything's resources are listed")
			require.NotEmpty(t, r.Read)
			for _, rd := range r.Read {
				assert.Positive(t, rd.Contents, "read %s", rd.URI)
			}
			assert.Contains(t, r.Capabilities, "tools")
			assert.Contains(t, r.Capabilities, "resources")
		})
	}
	// The 2026-07-28 era: the TypeScript SDK v2 client, pinned, on the same
	// endpoint over both transports.
	for _, tc := range []struct {
		name   string
		target map[string]any
	}{
		{"modern-connect", map[string]any{"kind": "stdio", "command": bins.mcpmux, "args": []string{"connect", "--config", d.path}}},
		{"modern-http", http},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r struct {
				Era        string          `json:"era"`
				Version    string          `json:"version"`
				Tools      []string        `json:"tools"`
				Everything string          `json:"everything"`
				Memory     string          `json:"memory"`
				Demo       string          `json:"demo"`
				Hidden     json.RawMessage `json:"hidden"`
				Asked      string          `json:"asked"`
			}
			sampled := "sampled for " + tc.name
			rw.runScript(t, "endpoint-v2.mjs", map[string]any{"target": tc.target, "hidden": hidden, "sampled": sampled}, &r, nil)
			t.Logf("%s: era %s %s, %d tools, hidden: %s", tc.name, r.Era, r.Version, len(r.Tools), r.Hidden)
			assert.Equal(t, "modern", r.Era)
			assert.Equal(t, "2026-07-28", r.Version)
			assert.Contains(t, r.Tools, "everything__echo")
			assert.Contains(t, r.Tools, "memory__read_graph")
			assert.Contains(t, r.Tools, "demo__echo")
			assert.NotContains(t, r.Tools, hidden)
			assert.Contains(t, r.Everything, "modern to everything")
			assert.Contains(t, r.Memory, "entities")
			assert.Equal(t, "modern to demo", r.Demo)
			assert.Contains(t, string(r.Hidden), `-32602`, "the hidden tool is refused")
			assert.NotContains(t, string(r.Hidden), `"resolved"`)
			assert.Contains(t, r.Asked, sampled, "the demo server's sampling request reached this client")
		})
	}
	// Each server is still one process, shared by every session.
	for _, name := range []string{"everything", "memory", "demo"} {
		pid, restarts, _ := rwServerStatus(t, d, name)
		assert.Positive(t, pid, "%s runs", name)
		assert.Zero(t, restarts, "%s never restarted", name)
	}
}
