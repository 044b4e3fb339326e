package streamable

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
	"github.com/mcpmux/mcpmux/session"
)

// Tool parameters a tool's input schema marks with x-mcp-header travel
// also as Mcp-Param-{Name} headers of a tools/call, and the server that
// reads the body (mcpmux) must check that the two agree. The tool
// definitions come from the server's tools/list, which mcpmux asks for on
// a session of its own and keeps a while per server.

// Bounds of the tool definitions kept.
const (
	toolsFresh   = 30 * time.Second // a list older than this is asked for again
	toolsRecheck = 2 * time.Second  // a tool missing from a list this old is looked for again
	toolsPages   = 16               // pages of tools/list read at most
	toolsWait    = 5 * time.Second  // how long one page may take
)

// paramHeader is one parameter marked x-mcp-header: its path in the
// arguments and the name of its header (after Mcp-Param-).
type paramHeader struct {
	path   []string
	header string
}

// toolList is what a server's tools/list said of its tools' parameter
// headers, by tool name, and when.
type toolList struct {
	at    time.Time
	tools map[string][]paramHeader
}

// toolCache keeps each server's toolList. Its zero value is ready.
type toolCache struct {
	mu      sync.Mutex
	servers map[string]*toolList
}

func (c *toolCache) get(server string) *toolList {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[server]
}

func (c *toolCache) set(server string, l *toolList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.servers == nil {
		c.servers = make(map[string]*toolList)
	}
	c.servers[server] = l
}

// headersOf is the parameter headers of tool on server, asking the server
// for its tools when the list kept is stale or lacks the tool; false when
// the tool is not known even then.
func (c *toolCache) headersOf(h *Handler, server string, ep Endpoint, tool, client string) ([]paramHeader, bool) {
	l := c.get(server)
	if l != nil && time.Since(l.at) < toolsFresh {
		if ph, ok := l.tools[tool]; ok || time.Since(l.at) < toolsRecheck {
			return ph, ok
		}
	}
	if fresh := h.listTools(ep, client); fresh != nil {
		c.set(server, fresh)
		l = fresh
	}
	if l == nil {
		return nil, false
	}
	ph, ok := l.tools[tool]
	return ph, ok
}

// checkParams checks the Mcp-Param headers of a tools/call against its
// arguments, for the parameters the tool's schema marks (client is
// clientOf the request).
func (c *toolCache) checkParams(h *Handler, r *http.Request, server string, ep Endpoint, m *jsonrpc.Message, client string) *refusal {
	tool, _ := stringAt(m.Frame, m.ParamsPath, "name")
	phs, _ := c.headersOf(h, server, ep, tool, client)
	var args json.RawMessage
	if s, ok := m.ParamsPath("arguments"); ok {
		args = m.Frame[s.Start:s.End]
	}
	for _, ph := range phs {
		if msg := checkParam(r, ph, args); msg != "" {
			return headerRefusal(m.ID, msg)
		}
	}
	return nil
}

// checkParam checks one parameter's header; "" when it agrees.
func checkParam(r *http.Request, ph paramHeader, args json.RawMessage) string {
	name := headerParamPrefix + ph.header
	raw := r.Header.Get(name)
	var val json.RawMessage
	if len(args) > 0 {
		if s, ok := jsonrpc.FindPath(args, ph.path...); ok {
			val = args[s.Start:s.End]
		}
	}
	if val == nil || string(val) == "null" {
		if raw != "" {
			return "the " + name + " header is sent for parameter " + strings.Join(ph.path, ".") + ", which the arguments do not have"
		}
		return ""
	}
	if raw == "" {
		return "the " + name + " header is required: the tool marks parameter " + strings.Join(ph.path, ".") + " with x-mcp-header"
	}
	got, ok := decodeHeader(raw)
	if !ok {
		return "the " + name + " header is not valid Base64"
	}
	if !sameValue(got, val) {
		return "the " + name + " header " + raw + " does not match the argument " + strings.Join(ph.path, ".")
	}
	return ""
}

// sameValue reports whether a header's value is the JSON value v: a string
// as it is, a boolean as true or false, a number by its value.
func sameValue(header string, v json.RawMessage) bool {
	switch v[0] {
	case '"':
		var s string
		return json.Unmarshal(v, &s) == nil && s == header
	case 't', 'f':
		return string(v) == header
	case '{', '[', 'n':
		return false
	}
	want, err1 := strconv.ParseFloat(string(v), 64)
	got, err2 := strconv.ParseFloat(strings.TrimSpace(header), 64)
	return err1 == nil && err2 == nil && math.Abs(want-got) <= 1e-9*math.Max(1, math.Abs(want))
}

// listTools asks the server for its tools on a session of mcpmux's own, as
// a 2026-07-28 client, on behalf of client (session.Peer.Client: an
// isolated server is asked on that client's process, not one of its own);
// nil when it could not get them.
func (h *Handler) listTools(ep Endpoint, client string) *toolList {
	l := &toolList{at: time.Now(), tools: make(map[string][]paramHeader)}
	var cursor string
	for range toolsPages {
		page, ok := h.toolsPage(ep, cursor, client)
		if !ok {
			return nil
		}
		for _, t := range page.Tools {
			l.tools[t.Name] = paramHeaders(t.InputSchema, nil, nil)
		}
		if cursor = page.NextCursor; cursor == "" {
			return l
		}
	}
	return l
}

// toolsPageResult is the part of a tools/list result that matters here.
type toolsPageResult struct {
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	NextCursor string `json:"nextCursor"`
}

// ownEnvelope is the envelope of mcpmux's own requests on this binding.
var ownEnvelope = map[string]any{
	protocol.MetaProtocolVersion:    protocol.Modern,
	protocol.MetaClientInfo:         map[string]string{"name": "mcpmux", "version": "http"},
	protocol.MetaClientCapabilities: map[string]any{},
}

// toolsPage asks for one page of tools/list.
func (h *Handler) toolsPage(ep Endpoint, cursor, client string) (toolsPageResult, bool) {
	params := map[string]any{"_meta": ownEnvelope}
	if cursor != "" {
		params["cursor"] = cursor
	}
	frame, err := jsonrpc.Request(json.RawMessage(`"mcpmux-tools"`), "tools/list", params)
	if err != nil || !h.enterModern() {
		return toolsPageResult{}, false
	}
	defer h.active.Done()
	var answer []byte
	put := func(f outbox.Frame) {
		if f.Tag == oneShotTag && f.Last && answer == nil {
			answer = f.Data
		}
	}
	peer := session.Peer{Transport: "http", Addr: "mcpmux (tool definitions)", OneRequest: true, Client: client}
	h.serveOne(ep, frame, put, peer, func(t *oneShot) {
		wait := time.NewTimer(toolsWait)
		defer wait.Stop()
		for answer == nil {
			select {
			case <-t.wake:
				t.deliver()
			case <-t.done:
				return
			case <-wait.C:
				return
			case <-h.ctx.Done():
				return
			}
		}
	}, oneShotMax)
	var page toolsPageResult
	if answer == nil {
		return page, false
	}
	m, err := jsonrpc.Parse(answer)
	ok := err == nil && m.Kind == jsonrpc.KindResult && json.Unmarshal(m.Result, &page) == nil
	return page, ok
}

// schemaNode is the part of a JSON schema that marks parameter headers.
type schemaNode struct {
	Properties map[string]struct {
		Header     json.RawMessage `json:"x-mcp-header"`
		Properties json.RawMessage `json:"properties"`
	} `json:"properties"`
}

// paramHeaders collects the parameters of schema (at path prefix) marked
// with x-mcp-header, nested objects included.
func paramHeaders(schema json.RawMessage, prefix []string, out []paramHeader) []paramHeader {
	var n schemaNode
	if len(schema) == 0 || json.Unmarshal(schema, &n) != nil {
		return out
	}
	for name, p := range n.Properties {
		path := append(append([]string(nil), prefix...), name)
		var header string
		if json.Unmarshal(p.Header, &header) == nil && header != "" {
			out = append(out, paramHeader{path: path, header: header})
		}
		if len(p.Properties) > 0 {
			out = paramHeaders(json.RawMessage(`{"properties":`+string(p.Properties)+`}`), path, out)
		}
	}
	return out
}
