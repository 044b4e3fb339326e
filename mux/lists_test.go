package mux

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
)

// answerList answers a list the fake was given, or says it has none.
func (p *fakeProc) answerList(m *jsonrpc.Message) {
	p.srv.mu.Lock()
	result, ok := p.srv.lists[m.Method]
	first := p.srv.listFirst
	p.srv.mu.Unlock()
	switch {
	case !ok:
		p.reply((&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no " + m.Method}).Response(m.ID))
	case first:
		p.reply([]byte(`{"result":` + result + `,"jsonrpc":"2.0","id":` + string(m.ID) + `}`))
	default:
		p.reply(jsonrpc.Response(m.ID, []byte(result)))
	}
}

// fakeListMemory is a fakeMemory that keeps lists too.
type fakeListMemory struct {
	*fakeMemory
	lists  map[string]string
	writes int
}

func (m *fakeListMemory) List(method string) (string, []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.lists[method]; ok {
		return "legacy", []byte(r)
	}
	return "", nil
}

func (m *fakeListMemory) RememberList(method, era string, result []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lists == nil {
		m.lists = map[string]string{}
	}
	m.lists[method] = string(result)
	m.writes++
	return nil
}

func (m *fakeListMemory) list(method string) (string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists[method], m.writes
}

const listTools = `{"jsonrpc":"2.0","id":"tl","method":"tools/list"}`

// listsRemembered runs a daemon's first life on a server that lists tools
// (a) and prompts: a session lists them, and resources, which the server
// does not list; Memory keeps its description and the two lists.
func listsRemembered(t *testing.T) *fakeListMemory {
	t.Helper()
	mem := &fakeListMemory{fakeMemory: new(fakeMemory)}
	srv := newFakeServer()
	srv.lists = map[string]string{"tools/list": `{"tools":[{"name":"a"}]}`, "prompts/list": `{"prompts":[]}`}
	h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy })
	c := h.session("2025-11-25")
	for _, method := range []string{"tools/list", "prompts/list", "resources/list"} {
		c.send(`{"jsonrpc":"2.0","id":1,"method":"` + method + `"}`)
		c.answer()
	}
	eventually(t, "the lists kept", func() bool { _, w := mem.list(""); return w == 2 })
	// The description is kept just after the server is published ready,
	// on the supervisor's goroutine: the session may be served first.
	eventually(t, "the description kept", func() bool { _, raw := mem.Description(); return raw != nil })
	assert.Len(t, srv.messages("tools/list"), 1, "the server is asked its lists by the sessions alone")
	tools, _ := mem.list("tools/list")
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, tools)
	_, res := mem.List("resources/list")
	assert.Nil(t, res, "the server has resources, but no resources/list: nothing kept")
	return mem
}

// While the server starts, a session's lists are answered from Memory at
// once (a later page waits for the server); once started, a server that
// lists otherwise is remembered anew and the session told that its tools
// changed, not its prompts, which did not.
func TestListsFromMemoryWhileStarting(t *testing.T) {
	mem := listsRemembered(t)
	srv := newFakeServer()
	srv.lists = map[string]string{"tools/list": `{"tools":[{"name":"b"}]}`, "prompts/list": `{"prompts":[]}`}
	gate := make(chan struct{})
	srv.initGate = gate
	h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy })
	c := h.session("2025-11-25")
	c.send(listTools)
	m := c.recv()
	require.Equal(t, `"tl"`, string(m.ID), "%s", m.Frame)
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, string(m.Result), "from memory")
	assert.Equal(t, StateStarting, h.Status().State, "answered while the server starts")
	assert.Empty(t, srv.messages("tools/list"), "the server was not asked")

	c.send(`{"jsonrpc":"2.0","id":"page","method":"tools/list","params":{"cursor":"2"}}`)
	close(gate)
	var got []string
	for len(got) < 2 {
		m := c.recv()
		got = append(got, m.Method+string(m.ID))
	}
	assert.ElementsMatch(t, []string{`"page"`, "notifications/tools/list_changed"}, got, "a later page waits for the server; only the tools changed")
	tools, _ := mem.list("tools/list")
	assert.JSONEq(t, `{"tools":[{"name":"b"}]}`, tools, "remembered anew")

	c.send(listTools)
	assert.JSONEq(t, `{"tools":[{"name":"b"}]}`, string(c.answer().Result), "the server's own answer once it runs")
	assert.Empty(t, srv.messages("prompts/list"), "a list no session was answered from memory is not asked")
}

// connectOnDemand attaches a session that wants the server only when it
// needs it, as an endpoint's are.
func (h *harness) connectOnDemand() *testClient {
	h.t.Helper()
	return h.pipe(func(conn net.Conn) {
		h.hub.Serve(h.ctx, session.NewStream(conn, h.hub.MaxMessageBytes()), session.Peer{Transport: "endpoint", OnDemand: true})
	})
}

// An on-demand session of a lazy server is initialized and listed from
// Memory without starting it; its first call starts it.
func TestOnDemandSessionStartsLazyServerAtItsFirstCall(t *testing.T) {
	mem := listsRemembered(t)
	srv := newFakeServer()
	srv.lists = map[string]string{"tools/list": `{"tools":[{"name":"a"}]}`}
	h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy; c.Lazy = true })
	c := h.connectOnDemand()
	c.send(initLegacy, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, listTools)
	assert.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, string(c.recv().Result))
	c.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	assert.Equal(t, `"p"`, string(c.recv().ID))
	assert.Equal(t, StateIdle, h.Status().State, "not started for initialize and lists")
	assert.Empty(t, srv.messages("initialize"))

	c.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"echo"}}`)
	m := c.answer()
	assert.Equal(t, `"call"`, string(m.ID))
	assert.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	assert.Len(t, srv.messages("initialize"), 1, "started by the call")
}

// Under idle_timeout, a server whose only session is on demand and has
// only listed is stopped again; a call of that session starts it, and
// keeps it while the session lasts.
func TestOnDemandSessionThatOnlyListsDoesNotKeepTheServer(t *testing.T) {
	mem := listsRemembered(t)
	srv := newFakeServer()
	srv.lists = map[string]string{"tools/list": `{"tools":[{"name":"a"}]}`}
	h := newHarnessOn(t, srv, func(c *Config) {
		c.Memory, c.Protocol, c.IdleTimeout = mem, ProtocolLegacy, 50*time.Millisecond
	})
	c := h.connectOnDemand()
	c.send(initLegacy, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	eventually(t, "started at once, then stopped: nobody uses it", func() bool {
		return len(srv.messages("initialize")) == 1 && h.Status().State == StateIdle
	})
	c.send(listTools)
	assert.JSONEq(t, `{"tools":[{"name":"a"}]}`, string(c.recv().Result))
	assert.Equal(t, StateIdle, h.Status().State)

	c.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"echo"}}`)
	assert.Equal(t, jsonrpc.KindResult, c.answer().Kind)
	deadline := time.Now().Add(300 * time.Millisecond) // six idle timeouts
	for time.Now().Before(deadline) {
		require.Equal(t, StateReady, h.Status().State, "kept for the session that called")
		time.Sleep(10 * time.Millisecond)
	}
	assert.Len(t, srv.messages("initialize"), 2)
}
