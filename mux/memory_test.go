package mux

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// fakeMemory is a state folder in memory.
type fakeMemory struct {
	mu     sync.Mutex
	era    string
	result []byte
	writes int
}

func (m *fakeMemory) Asks() ([]string, bool)        { return nil, false }
func (m *fakeMemory) RememberAsks(kind string) error { return nil }

func (m *fakeMemory) Description() (string, []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.era, m.result
}

func (m *fakeMemory) RememberDescription(era string, result []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.era, m.result = era, append([]byte(nil), result...)
	m.writes++
	return nil
}

func (m *fakeMemory) state() (string, string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.era, string(m.result), m.writes
}

const initLegacy = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// remembered runs a daemon's first life: the server starts, and Memory
// keeps what it said.
func remembered(t *testing.T) *fakeMemory {
	t.Helper()
	mem := new(fakeMemory)
	h := newHarness(t, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy })
	c := h.connect()
	c.send(initLegacy)
	require.Equal(t, jsonrpc.KindResult, c.answer().Kind)
	eventually(t, "the description kept", func() bool { _, _, w := mem.state(); return w == 1 })
	era, result, _ := mem.state()
	require.Equal(t, "legacy", era)
	require.Contains(t, result, `"serverInfo":{"name":"fake","version":"1"}`)
	return mem
}

// A daemon that starts again answers a session's initialize from Memory at
// once, while its server is still starting; the session's requests wait
// for the server as always, and a server that says the same as before is
// not written again and tells the session nothing new.
func TestRememberedDescriptionAnswersAtOnce(t *testing.T) {
	mem := remembered(t)
	srv := newFakeServer()
	gate := make(chan struct{})
	srv.initGate = gate
	h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy })
	c := h.connect()
	c.send(initLegacy)
	m := c.recv() // the gate is shut: the server has not answered its initialize
	require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	assert.Contains(t, string(m.Result), `"name":"fake"`)
	assert.Equal(t, StateStarting, h.Status().State, "answered while the server starts")

	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"n":2}}`)
	close(gate)
	m = c.recv()
	require.Equal(t, jsonrpc.KindResult, m.Kind, "the request waited for the server: %s", m.Frame)
	c.send(`{"jsonrpc":"2.0","id":3,"method":"echo"}`)
	for {
		m := c.recv()
		require.False(t, strings.HasSuffix(m.Method, "/list_changed"), "nothing changed, yet %s", m.Frame)
		if m.Kind == jsonrpc.KindResult {
			break
		}
	}
	_, _, writes := mem.state()
	assert.Equal(t, 1, writes, "the same description is not written again")
}

// A server that describes itself otherwise than Memory did: the sessions
// answered from Memory get list_changed, and Memory the new description.
func TestRememberedDescriptionThatChanged(t *testing.T) {
	mem := remembered(t)
	srv := newFakeServer()
	srv.caps = strings.Replace(srv.caps, `"tools":{}`, `"tools":{"listChanged":true}`, 1)
	gate := make(chan struct{})
	srv.initGate = gate
	h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy })
	c := h.connect()
	c.send(initLegacy)
	require.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	eventually(t, "the session is ready", func() bool { return len(h.hub.sessions.ready()) == 1 })
	close(gate)
	seen := map[string]bool{}
	for len(seen) < 3 {
		m := c.recv()
		if strings.HasSuffix(m.Method, "/list_changed") {
			seen[m.Method] = true
		}
	}
	assert.Equal(t, map[string]bool{"notifications/tools/list_changed": true, "notifications/prompts/list_changed": true, "notifications/resources/list_changed": true}, seen)
	eventually(t, "kept", func() bool { _, _, w := mem.state(); return w == 2 })
	_, result, _ := mem.state()
	assert.Contains(t, result, `"listChanged":true`)
}

// A server that came back speaking another protocol version than Memory
// said: the sessions that negotiated against Memory are closed, as after
// a restart.
func TestRememberedDescriptionOfAnotherVersion(t *testing.T) {
	mem := remembered(t)
	srv := newFakeServer()
	srv.version = "2025-06-18"
	gate := make(chan struct{})
	srv.initGate = gate
	h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolLegacy })
	c := h.connect()
	c.send(initLegacy)
	require.Equal(t, jsonrpc.KindResult, c.recv().Kind)
	close(gate)
	for {
		if _, err := c.recvFrame(); err != nil {
			break // closed by the daemon
		}
	}
	assert.Equal(t, 1, srv.started())
}

// Memory of another era than the configured protocol is not used: the
// session waits for the server.
func TestRememberedDescriptionOfAnotherEra(t *testing.T) {
	mem := remembered(t)
	srv := newFakeServer()
	gate := make(chan struct{})
	srv.initGate = gate
	h := newHarnessOn(t, srv, func(c *Config) { c.Memory = mem; c.Protocol = ProtocolModern })
	require.Nil(t, h.hub.describedServer(), "a legacy description is no use to a modern-only server")
	close(gate)
}
