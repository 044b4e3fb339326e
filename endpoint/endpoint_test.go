package endpoint_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/endpoint"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// fake is a member server played by the test: it answers initialize,
// tools/list (pages of two when paged), prompts/list and tools/call, and
// records every request it is sent.
type fake struct {
	name    string
	tools   []string
	prompts []string
	uris    []string    // its resources
	paged   bool        // tools/list in pages: the first tool, then the rest
	initErr string      // answer initialize with an upstream_unavailable error
	hold    bool        // never answer tools/call
	broken  atomic.Bool // the same as initErr, from now on

	mu   sync.Mutex
	seen []string // "method" or "tools/call NAME", and frames of notifications and answers
	t    session.Transport
}

func (f *fake) Serve(ctx context.Context, t session.Transport, _ session.Peer) error {
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
	for {
		frame, _, err := t.ReadFrame()
		if err != nil {
			return nil
		}
		msg, err := jsonrpc.Parse(frame)
		if err != nil {
			continue
		}
		if msg.Kind != jsonrpc.KindRequest {
			f.record(string(frame))
			continue
		}
		name, _ := msg.ParamsString("name")
		switch msg.Method {
		case "tools/call", "prompts/get":
			f.record(msg.Method + " " + name)
		default:
			f.record(msg.Method)
		}
		if answer := f.answer(msg, name); answer != nil {
			f.write(answer)
		}
	}
}

func (f *fake) answer(msg *jsonrpc.Message, name string) []byte {
	result := func(v any) []byte {
		b, _ := json.Marshal(v)
		return jsonrpc.Response(msg.ID, b)
	}
	failed := f.initErr != "" || f.broken.Load()
	if failed && msg.Method != "initialize" { // as a router does for a session not initialized
		return (&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session not initialized", Reason: jsonrpc.ReasonNotInitialized}).Response(msg.ID)
	}
	switch msg.Method {
	case "initialize":
		if failed {
			return (&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server " + f.name + " is failed", Reason: jsonrpc.ReasonUpstreamUnavailable, Server: f.name}).Response(msg.ID)
		}
		caps := map[string]any{"tools": map[string]any{}}
		if len(f.prompts) > 0 {
			caps["prompts"] = map[string]any{"listChanged": true}
		}
		return result(map[string]any{"protocolVersion": "2025-06-18", "capabilities": caps,
			"serverInfo": map[string]any{"name": f.name}, "instructions": "I am " + f.name + "."})
	case "tools/list":
		tools := f.tools
		var next string
		cursor, _ := msg.ParamsString("cursor")
		if f.paged && cursor == "" {
			tools, next = tools[:1], "page2"
		} else if f.paged {
			tools = tools[1:]
		}
		list := []map[string]any{}
		for _, t := range tools {
			list = append(list, map[string]any{"name": t, "inputSchema": map[string]any{"type": "object"}})
		}
		out := map[string]any{"tools": list}
		if next != "" {
			out["nextCursor"] = next
		}
		return result(out)
	case "resources/list":
		list := []map[string]any{}
		for _, u := range f.uris {
			list = append(list, map[string]any{"uri": u, "name": u})
		}
		return result(map[string]any{"resources": list})
	case "resources/templates/list":
		return result(map[string]any{"resourceTemplates": []map[string]any{{"uriTemplate": f.name + "://t/{id}", "name": "t"}}})
	case "resources/read", "resources/subscribe", "completion/complete":
		uri, _ := msg.ParamsString("uri")
		ref, _ := msg.ParamsString("ref", "name")
		f.record(msg.Method + " " + uri + ref)
		return result(map[string]any{"served_by": f.name})
	case "prompts/list":
		list := []map[string]any{}
		for _, p := range f.prompts {
			list = append(list, map[string]any{"name": p})
		}
		return result(map[string]any{"prompts": list})
	case "tools/call":
		if f.hold {
			return nil
		}
		return result(map[string]any{"content": []any{map[string]any{"type": "text", "text": f.name + " ran " + name}}})
	}
	return result(map[string]any{})
}

func (f *fake) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, s)
}

// write sends a frame to the endpoint, as the member's router would.
func (f *fake) write(frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t.WriteFrames([]outbox.Frame{{Data: frame}})
}

func (f *fake) saw() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

func (f *fake) sawAny(prefix string) bool {
	for _, s := range f.saw() {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// client is the test's end of one client session of an endpoint.
type client struct {
	t    *testing.T
	conn net.Conn
	in   chan map[string]json.RawMessage
}

// serve starts one client session of an endpoint of the members given.
func serve(t *testing.T, cfg endpoint.Config, members ...endpoint.Member) *client {
	t.Helper()
	return connect(t, newEndpoint(cfg, members...))
}

// newEndpoint is an endpoint of the members given (a fake by its name,
// another by its place in cfg.Servers).
func newEndpoint(cfg endpoint.Config, members ...endpoint.Member) *endpoint.Endpoint {
	byName := map[string]endpoint.Member{}
	for i, m := range members {
		if f, ok := m.(*fake); ok {
			byName[f.name] = f
		} else {
			byName[cfg.Servers[i]] = m
		}
	}
	return endpoint.New(cfg, endpoint.Options{Lookup: func(name string) (endpoint.Member, bool) {
		m, ok := byName[name]
		return m, ok
	}, Version: "test"})
}

// connect opens a client session of e.
func connect(t *testing.T, e *endpoint.Endpoint) *client {
	t.Helper()
	ours, theirs := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.Serve(ctx, session.NewStream(theirs, 1<<20), session.Peer{Transport: "test"}) })
	c := &client{t: t, conn: ours, in: make(chan map[string]json.RawMessage, 100)}
	wg.Go(func() {
		defer close(c.in)
		r := bufio.NewReader(ours)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) == nil {
				c.in <- m
			}
		}
	})
	t.Cleanup(func() {
		ours.Close()
		cancel()
		wg.Wait()
	})
	return c
}

func (c *client) send(format string, args ...any) {
	c.t.Helper()
	_, err := fmt.Fprintf(c.conn, format+"\n", args...)
	require.NoError(c.t, err)
}

// next is the next message the client receives.
func (c *client) next() map[string]json.RawMessage {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		require.True(c.t, ok, "the session ended")
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("no message within 10s")
		return nil
	}
}

// call sends a request and returns its answer's result, or error.
func (c *client) call(id int, method, params string) (result, errObj json.RawMessage) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	m := c.next()
	require.Equal(c.t, fmt.Sprint(id), string(m["id"]), "answer to %s: %v", method, m)
	return m["result"], m["error"]
}

func (c *client) initialize() json.RawMessage {
	c.t.Helper()
	r, e := c.call(0, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}`)
	require.Nil(c.t, e)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func names(t *testing.T, result json.RawMessage, key string) []string {
	t.Helper()
	var r map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(result, &r))
	var items []struct {
		Name string `json:"name"`
	}
	require.NoError(t, json.Unmarshal(r[key], &items))
	out := []string{}
	for _, it := range items {
		out = append(out, it.Name)
	}
	return out
}

func reason(t *testing.T, errObj json.RawMessage) (code int, reason, message string) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Reason string `json:"reason"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(errObj, &e), "error %s", errObj)
	return e.Code, e.Data.Reason, e.Message
}

// TestEndpointListsAndRoutesByPrefix: one session reaches two servers, with
// their tools prefixed, calls routed by prefix, and a hidden tool refused
// before it reaches its server.
func TestEndpointListsAndRoutesByPrefix(t *testing.T) {
	a := &fake{name: "a", tools: []string{"echo", "secret"}, prompts: []string{"hello"}}
	b := &fake{name: "b", tools: []string{"echo"}}
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"a", "b"}, DenyTools: []string{"a__sec*"}}, a, b)

	var init struct {
		Capabilities map[string]any `json:"capabilities"`
		ServerInfo   struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
		Instructions string `json:"instructions"`
	}
	require.NoError(t, json.Unmarshal(c.initialize(), &init))
	assert.Equal(t, "mcpmux", init.ServerInfo.Name)
	assert.Contains(t, init.Capabilities, "tools")
	assert.Equal(t, map[string]any{"listChanged": true}, init.Capabilities["prompts"], "the union of the capabilities")
	assert.Equal(t, "## a\n\nI am a.\n\n## b\n\nI am b.", init.Instructions)

	r, e := c.call(1, "tools/list", `{}`)
	require.Nil(t, e)
	assert.Equal(t, []string{"a__echo", "b__echo"}, names(t, r, "tools"), "prefixed, the hidden tool absent")
	r, e = c.call(2, "prompts/list", `{}`)
	require.Nil(t, e)
	assert.Equal(t, []string{"a__hello"}, names(t, r, "prompts"))

	r, e = c.call(3, "tools/call", `{"name":"b__echo","arguments":{}}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), "b ran echo", "routed to b, the prefix removed")
	_, e = c.call(4, "prompts/get", `{"name":"a__hello"}`)
	require.Nil(t, e)
	assert.Contains(t, a.saw(), "prompts/get hello")

	_, e = c.call(5, "tools/call", `{"name":"a__secret","arguments":{}}`)
	code, why, _ := reason(t, e)
	assert.Equal(t, jsonrpc.CodeInvalidParams, code)
	assert.Equal(t, jsonrpc.ReasonUnknownTool, why)
	_, e = c.call(6, "tools/call", `{"name":"zz__echo"}`)
	code, why, msg := reason(t, e)
	assert.Equal(t, jsonrpc.CodeInvalidParams, code)
	assert.Equal(t, jsonrpc.ReasonUnknownTool, why)
	assert.Contains(t, msg, "a, b", "the unknown prefix's error names the endpoint's servers")

	// Each answer above came after the server's: nothing more can arrive.
	assert.False(t, a.sawAny("tools/call secret"), "the hidden tool never reached its server")
	assert.Equal(t, []string{"initialize", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "tools/list", "prompts/list", "prompts/get hello"}, a.saw())
}

// TestEndpointCursorAcrossServers: a list is merged from every server's
// first page, and the cursor carries on with those that have more.
func TestEndpointCursorAcrossServers(t *testing.T) {
	a := &fake{name: "a", tools: []string{"one", "two", "three"}, paged: true}
	b := &fake{name: "b", tools: []string{"x"}}
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"a", "b"}}, a, b)
	c.initialize()
	r, e := c.call(1, "tools/list", `{}`)
	require.Nil(t, e)
	assert.Equal(t, []string{"a__one", "b__x"}, names(t, r, "tools"))
	var page struct {
		NextCursor string `json:"nextCursor"`
	}
	require.NoError(t, json.Unmarshal(r, &page))
	require.NotEmpty(t, page.NextCursor)
	r, e = c.call(2, "tools/list", fmt.Sprintf(`{"cursor":%q}`, page.NextCursor))
	require.Nil(t, e)
	assert.Equal(t, []string{"a__two", "a__three"}, names(t, r, "tools"), "only the server with more")
	assert.NotContains(t, string(r), "nextCursor")
	assert.Equal(t, 1, strings.Count(strings.Join(b.saw(), " "), "tools/list"), "b was not asked again")

	_, e = c.call(3, "tools/list", `{"cursor":"!!"}`)
	code, _, _ := reason(t, e)
	assert.Equal(t, jsonrpc.CodeInvalidParams, code)
}

// TestEndpointListChangedOnce: list_changed from several servers reaches
// the client once, until it lists again.
func TestEndpointListChangedOnce(t *testing.T) {
	a := &fake{name: "a", tools: []string{"t"}}
	b := &fake{name: "b", tools: []string{"t"}}
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"a", "b"}}, a, b)
	c.initialize()
	changed := []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	a.write(changed)
	b.write(changed)
	m := c.next()
	assert.Equal(t, `"notifications/tools/list_changed"`, string(m["method"]))
	r, e := c.call(1, "tools/list", `{}`) // also proves no second list_changed came first
	require.Nil(t, e)
	assert.Len(t, names(t, r, "tools"), 2)
	b.write(changed)
	m = c.next()
	assert.Equal(t, `"notifications/tools/list_changed"`, string(m["method"]), "once listed, the next change is told")
}

// TestEndpointFailedServerStaysLocal: a server whose session cannot
// initialize, and one that is not served, leave the endpoint working; a
// call to either gets upstream_unavailable naming it.
func TestEndpointFailedServerStaysLocal(t *testing.T) {
	good := &fake{name: "good", tools: []string{"t"}}
	bad := &fake{name: "bad", tools: []string{"t"}, initErr: "server bad is failed"}
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"bad", "good", "missing"}}, bad, good)
	c.initialize()
	r, e := c.call(1, "tools/list", `{}`)
	require.Nil(t, e)
	assert.Equal(t, []string{"good__t"}, names(t, r, "tools"))

	_, e = c.call(2, "tools/call", `{"name":"bad__t"}`)
	code, why, msg := reason(t, e)
	assert.Equal(t, jsonrpc.ReasonUpstreamUnavailable, why, "error %s", e)
	assert.Equal(t, jsonrpc.CodeInternalError, code)
	assert.Contains(t, msg, "bad")
	assert.Contains(t, string(e), `"server":"bad"`)
	assert.True(t, bad.sawAny("tools/call"), "bad's session had its initialize again first, and the call went on to its router")

	_, e = c.call(3, "tools/call", `{"name":"missing__t"}`)
	_, why, _ = reason(t, e)
	assert.Equal(t, jsonrpc.ReasonUpstreamUnavailable, why)
	assert.Contains(t, string(e), `"server":"missing"`)
	r, e = c.call(4, "tools/call", `{"name":"good__t"}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), "good ran t")
}

// TestEndpointMemberSessionEnds: a member whose session ends (its server
// removed, say) fails its calls in flight with upstream_unavailable, and
// the endpoint goes on with the others.
func TestEndpointMemberSessionEnds(t *testing.T) {
	a := &fake{name: "a", tools: []string{"slow"}, hold: true}
	b := &fake{name: "b", tools: []string{"t"}}
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"a", "b"}}, a, b)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__slow"}}`)
	testutil.Until(t, 5*time.Second, "the call reaches a", func() bool { return a.sawAny("tools/call slow") })
	a.mu.Lock()
	a.t.Close()
	a.mu.Unlock()
	m := c.next()
	require.Equal(t, "1", string(m["id"]))
	_, why, _ := reason(t, m["error"])
	assert.Equal(t, jsonrpc.ReasonUpstreamUnavailable, why)
	assert.Contains(t, string(m["error"]), `"server":"a"`)

	r, e := c.call(2, "tools/list", `{}`)
	require.Nil(t, e)
	assert.Equal(t, []string{"b__t"}, names(t, r, "tools"))
	_, e = c.call(3, "tools/call", `{"name":"a__slow"}`)
	_, why, _ = reason(t, e)
	assert.Equal(t, jsonrpc.ReasonUpstreamUnavailable, why)
}

// TestEndpointListsWhatIsKnown: a server that cannot answer a list (it
// failed since) is listed with what the endpoint last heard from it; a
// call to it gets upstream_unavailable.
func TestEndpointListsWhatIsKnown(t *testing.T) {
	a := &fake{name: "a", tools: []string{"t"}}
	b := &fake{name: "b", tools: []string{"t"}}
	e := newEndpoint(endpoint.Config{Name: "all", Servers: []string{"a", "b", "c"}}, a, b)
	first := connect(t, e)
	first.initialize()
	r, err := first.call(1, "tools/list", `{}`)
	require.Nil(t, err)
	assert.Equal(t, []string{"a__t", "b__t"}, names(t, r, "tools"))

	a.broken.Store(true)
	second := connect(t, e)
	second.initialize()
	r, err = second.call(1, "tools/list", `{}`)
	require.Nil(t, err)
	assert.Equal(t, []string{"a__t", "b__t"}, names(t, r, "tools"), "a's tools as last known; c never served, nothing known")
	_, err = second.call(2, "tools/call", `{"name":"a__t"}`)
	_, why, _ := reason(t, err)
	assert.Equal(t, jsonrpc.ReasonUpstreamUnavailable, why)
}

// TestEndpointProgressCancelAndServerRequests: progress and cancellation
// cross as on a plain session, and a server's own request reaches the
// client and its answer the server.
func TestEndpointProgressCancelAndServerRequests(t *testing.T) {
	a := &fake{name: "a", tools: []string{"slow"}, hold: true}
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"a"}}, a)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__slow","_meta":{"progressToken":"tok"}}}`)
	testutil.Until(t, 5*time.Second, "the call reaches a", func() bool { return a.sawAny("tools/call slow") })

	a.write([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1}}`))
	m := c.next()
	assert.Equal(t, `"notifications/progress"`, string(m["method"]))
	assert.JSONEq(t, `{"progressToken":"tok","progress":1}`, string(m["params"]))

	a.write([]byte(`{"jsonrpc":"2.0","id":"s9","method":"sampling/createMessage","params":{"messages":[]}}`))
	m = c.next()
	assert.Equal(t, `"sampling/createMessage"`, string(m["method"]))
	c.send(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant"}}`, m["id"])
	testutil.Until(t, 5*time.Second, "the answer reaches a under its own id", func() bool {
		return a.sawAny(`{"jsonrpc":"2.0","id":"s9","result":{"role":"assistant"}}`)
	})

	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"enough"}}`)
	testutil.Until(t, 5*time.Second, "the cancellation reaches a under its call's id", func() bool {
		for _, s := range a.saw() {
			if strings.Contains(s, "notifications/cancelled") && !strings.Contains(s, `"c1"`) && strings.Contains(s, "enough") {
				return true
			}
		}
		return false
	})
	r, e := c.call(2, "ping", `{}`)
	assert.Nil(t, e)
	assert.JSONEq(t, `{}`, string(r))
}

// TestEndpointResourcesAndCompletion: resources are routed by the URI
// their server listed (or its template's start), completions by their ref.
func TestEndpointResourcesAndCompletion(t *testing.T) {
	a := &fake{name: "a", uris: []string{"file:///a.txt"}, prompts: []string{"p"}}
	b := &fake{name: "b", uris: []string{"mem://b"}}
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"a", "b"}}, a, b)
	c.initialize()
	r, e := c.call(1, "resources/list", `{}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), `"file:///a.txt"`, "URIs keep their names")
	assert.Contains(t, string(r), `"mem://b"`)
	_, e = c.call(2, "resources/templates/list", `{}`)
	require.Nil(t, e)

	r, e = c.call(3, "resources/read", `{"uri":"mem://b"}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), `"served_by":"b"`)
	r, e = c.call(4, "resources/subscribe", `{"uri":"file:///a.txt"}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), `"served_by":"a"`)
	r, e = c.call(5, "resources/read", `{"uri":"b://t/42"}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), `"served_by":"b"`, "by the start of b's template")
	_, e = c.call(6, "resources/read", `{"uri":"nope://x"}`)
	code, why, _ := reason(t, e)
	assert.Equal(t, [2]any{jsonrpc.CodeInvalidParams, jsonrpc.ReasonUnknownResource}, [2]any{code, why})

	r, e = c.call(7, "completion/complete", `{"ref":{"type":"ref/prompt","name":"a__p"},"argument":{"name":"x","value":""}}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), `"served_by":"a"`)
	assert.True(t, a.sawAny("completion/complete p"), "the prompt's prefix removed")
	r, e = c.call(8, "completion/complete", `{"ref":{"type":"ref/resource","uri":"mem://b"},"argument":{"name":"x","value":""}}`)
	require.Nil(t, e)
	assert.Contains(t, string(r), `"served_by":"b"`)

	r, e = c.call(9, "logging/setLevel", `{"level":"debug"}`)
	require.Nil(t, e)
	assert.JSONEq(t, `{}`, string(r))
	assert.True(t, a.sawAny("logging/setLevel") && b.sawAny("logging/setLevel"), "to every server")
}

// TestEndpointOverARouter: the members are real routers, each with its
// own server process; an endpoint session initializes through them and
// its calls reach the servers.
func TestEndpointOverARouter(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hubs := map[string]mux.Server{}
	for _, name := range []string{"one", "two"} {
		h := mux.New(mux.Config{Name: name, Upstream: upstream.Config{Command: exe,
			Env: map[string]string{testutil.FakeServerEnv: "serve", testutil.FakeTagEnv: name}}})
		hubs[name] = h
		wg.Go(func() { h.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"one", "two"}}, hubs["one"], hubs["two"])
	var init struct {
		Capabilities map[string]any `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(c.initialize(), &init))
	assert.Contains(t, init.Capabilities, "tools")
	r, e := c.call(1, "tools/call", `{"name":"two__anything","arguments":{}}`)
	require.Nil(t, e, "error %s", e)
	assert.JSONEq(t, `{}`, string(r))

	// A 2026-07-28 client: server/discover, then requests that carry their
	// session in _meta, with no initialize.
	modern := serve(t, endpoint.Config{Name: "all", Servers: []string{"one", "two"}}, hubs["one"], hubs["two"])
	r, e = modern.call(1, "server/discover", `{}`)
	require.Nil(t, e, "error %s", e)
	var disc struct {
		ResultType        string         `json:"resultType"`
		SupportedVersions []string       `json:"supportedVersions"`
		Capabilities      map[string]any `json:"capabilities"`
	}
	require.NoError(t, json.Unmarshal(r, &disc))
	assert.Equal(t, "complete", disc.ResultType)
	assert.Contains(t, disc.SupportedVersions, protocol.Modern)
	assert.Contains(t, disc.Capabilities, "tools")
	envelope := fmt.Sprintf(`"_meta":{%q:%q,%q:{"name":"m","version":"1"},%q:{}}`,
		protocol.MetaProtocolVersion, protocol.Modern, protocol.MetaClientInfo, protocol.MetaClientCapabilities)
	r, e = modern.call(2, "tools/call", `{"name":"one__anything","arguments":{},`+envelope+`}`)
	require.Nil(t, e, "error %s", e)
	assert.Contains(t, string(r), `"resultType":"complete"`, "answered in the 2026-07-28 shape: %s", r)
	r, e = modern.call(3, "tools/list", `{`+envelope+`}`)
	require.Nil(t, e, "error %s", e)
	assert.Contains(t, string(r), `"resultType":"complete"`, "the merged list in the 2026-07-28 shape: %s", r)
	assert.Contains(t, string(r), `"ttlMs":0`, "a list result says how long it may be cached (the v2 SDK requires it): %s", r)
	assert.Contains(t, string(r), `"cacheScope":"private"`, "and by whom: %s", r)
}

// primed is a server's memory as an earlier run of the daemon left it:
// its description and its tools.
type primed struct {
	mu    sync.Mutex
	lists map[string][]byte
}

func (p *primed) Asks() ([]string, bool)    { return nil, false }
func (p *primed) RememberAsks(string) error { return nil }
func (p *primed) Description() (string, []byte) {
	return "legacy", []byte(`{"protocolVersion":"` + protocol.LatestLegacy + `","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`)
}
func (p *primed) RememberDescription(string, []byte) error { return nil }
func (p *primed) List(method string) (string, []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.lists[method]; ok {
		return "legacy", r
	}
	return "", nil
}
func (p *primed) RememberList(method, _ string, result []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lists[method] = result
	return nil
}

// TestEndpointListsFromMemoryWithoutStarting: the members are lazy routers
// whose memory has their tools; an endpoint session is initialized and
// listed without starting any, and a call starts only the server it
// names, which lists otherwise: the memory is refreshed and the client
// told its tools changed.
func TestEndpointListsFromMemoryWithoutStarting(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hubs := map[string]*mux.Hub{}
	mems := map[string]*primed{}
	for _, name := range []string{"one", "two"} {
		mems[name] = &primed{lists: map[string][]byte{"tools/list": []byte(`{"tools":[{"name":"t` + name + `","inputSchema":{"type":"object"}}]}`)}}
		h := mux.New(mux.Config{Name: name, Lazy: true, Memory: mems[name], Upstream: upstream.Config{Command: exe,
			Env: map[string]string{testutil.FakeServerEnv: "serve", testutil.FakeTagEnv: name}}})
		hubs[name] = h
		wg.Go(func() { h.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	c := serve(t, endpoint.Config{Name: "all", Servers: []string{"one", "two"}}, hubs["one"], hubs["two"])
	c.initialize()
	r, e := c.call(1, "tools/list", `{}`)
	require.Nil(t, e, "error %s", e)
	assert.ElementsMatch(t, []string{"one__tone", "two__ttwo"}, names(t, r, "tools"))
	for name, h := range hubs {
		assert.Equal(t, mux.StateIdle, h.Status().State, "%s is not started for initialize and lists", name)
	}

	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"two__ttwo","arguments":{}}}`)
	got := map[string]bool{}
	for len(got) < 2 { // the answer, and the news of the refreshed list, in either order
		m := c.next()
		require.Nil(t, m["error"], "error %s", m["error"])
		got[string(m["id"])+string(m["method"])] = true
	}
	assert.Equal(t, map[string]bool{"2": true, `"notifications/tools/list_changed"`: true}, got, "the started server lists otherwise")
	assert.Equal(t, mux.StateReady, hubs["two"].Status().State, "started by the call")
	assert.Equal(t, mux.StateIdle, hubs["one"].Status().State, "the other is not")
	_, tools := mems["two"].List("tools/list")
	assert.JSONEq(t, `{}`, string(tools), "remembered anew")
}
