package daemon_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/endpoint"
)

// TestEndpointsServedAndReloaded: an endpoint has its socket, reaches its
// servers through it, is listed by GET /status; a reload adds, removes and
// changes endpoints, the change seen by the sessions that begin after it.
func TestEndpointsServedAndReloaded(t *testing.T) {
	a, b, c := fake(t, "a", "a"), fake(t, "b", "b"), fake(t, "c", "c")
	ep := func(name string, servers ...string) daemon.Endpoint {
		return daemon.Endpoint{Endpoint: endpoint.Config{Name: name, Servers: servers}}
	}
	next := daemon.Reloaded{Servers: []daemon.Server{a, b}, Endpoints: []daemon.Endpoint{ep("all", "a", "b"), ep("one", "a")}}
	r := start(t, daemon.Config{
		Servers:   next.Servers,
		Endpoints: next.Endpoints,
		Reload:    func() (daemon.Reloaded, error) { return next, nil },
	})
	call := func(cl *client, id, tool string) error {
		cl.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `"}}`)
		_, err := cl.await(id)
		return err
	}
	old := dial(t, r.socket("all"))
	require.NoError(t, call(old, "1", "b__anything"), "b through the endpoint all")
	require.NoError(t, call(dial(t, r.socket("one")), "1", "a__anything"), "a through the endpoint one")
	st := r.status(t)
	require.Len(t, st.Endpoints, 2)
	assert.Equal(t, daemon.EndpointStatus{Name: "all", Servers: []string{"a", "b"}, Sessions: 1}, st.Endpoints[0])
	assert.Equal(t, "one", st.Endpoints[1].Name)

	next = daemon.Reloaded{Servers: []daemon.Server{a, b, c}, Endpoints: []daemon.Endpoint{ep("all", "a", "b", "c"), ep("two", "c")}}
	res, err := r.d.Reload(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"c"}, res.Added)
	_, err = os.Stat(r.socket("one"))
	assert.True(t, os.IsNotExist(err), "the removed endpoint's socket is gone: %v", err)
	require.NoError(t, call(dial(t, r.socket("two")), "1", "c__anything"), "the added endpoint serves")
	require.NoError(t, call(dial(t, r.socket("all")), "1", "c__anything"), "a new session of all reaches the added server")
	assert.ErrorContains(t, call(old, "2", "c__anything"), "unknown_tool", "a session begun before keeps its servers")
	require.NoError(t, call(old, "3", "a__anything"), "and goes on")

	next.Endpoints = []daemon.Endpoint{ep("a", "b")}
	_, err = r.d.Reload(t.Context())
	assert.ErrorContains(t, err, `endpoint "a"`, "an endpoint may not take a server's name")
}
