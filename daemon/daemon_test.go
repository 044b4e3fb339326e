package daemon_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/socket"
)

// TestStatusAndRestart: the servers answer on their sockets, GET /status
// lists them by name, and POST /servers/NAME/restart starts a new process
// under the same session.
func TestStatusAndRestart(t *testing.T) {
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "b", "b"), fake(t, "a", "a")}, Version: "v-test",
		ResidentBytes: func() uint64 { return 42 }})
	c := dial(t, r.socket("a"))
	pid, tag, err := c.whoami("1")
	require.NoError(t, err)
	assert.Equal(t, "a", tag, "server a answers on a.sock")

	st := r.status(t)
	var names []string
	for _, s := range st.Servers {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"a", "b"}, names, "GET /status lists the servers by name")
	assert.Equal(t, [3]any{"v-test", os.Getpid(), uint64(42)}, [3]any{st.Version, st.Pid, st.RSSBytes}, "version, pid, resident bytes")

	code, body, err := r.control(http.MethodPost, "/servers/a/restart")
	require.NoError(t, err)
	assert.Equal(t, [2]any{http.StatusOK, `{"restarting":"a"}`}, [2]any{code, strings.TrimSpace(string(body))})
	testutil.Eventually(t, within, "a new process of a", func() (bool, error) {
		p, _, err := c.whoami(`"again"`)
		return err == nil && p != pid, err
	})

	code, body, err = r.control(http.MethodPost, "/servers/nope/restart")
	require.NoError(t, err)
	assert.Equal(t, [2]any{http.StatusNotFound, `{"error":"no server named \"nope\""}`}, [2]any{code, strings.TrimSpace(string(body))})
}

// TestLogs: GET /servers/NAME/logs has the server's events; follow keeps
// the request open until the daemon stops.
func TestLogs(t *testing.T) {
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "a", "a")}})
	dial(t, r.socket("a"))
	// A session may be answered before the hub has logged that the server
	// is ready: the line comes soon after, not before.
	testutil.Eventually(t, within, "the hub's events have server ready", func() (bool, error) {
		code, body, err := r.control(http.MethodGet, "/servers/a/logs")
		if err != nil || code != http.StatusOK {
			return false, fmt.Errorf("%d %s: %v", code, body, err)
		}
		return strings.Contains(string(body), "server ready"), nil
	})

	code, body, err := r.control(http.MethodGet, "/servers/nope/logs")
	require.NoError(t, err)
	assert.Equal(t, [2]any{http.StatusNotFound, `{"error":"no server named \"nope\""}`}, [2]any{code, strings.TrimSpace(string(body))})

	// A follower gets the recent lines at once, then stays until the daemon stops.
	resp, err := r.get("/servers/a/logs?follow=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.NotEmpty(t, strings.TrimSpace(first), "the follower's first line")
	r.stop()
	_, err = io.ReadAll(resp.Body)
	assert.NoError(t, err, "the follower's answer ends cleanly with the daemon")
}

// TestReload: added servers start, removed ones stop, one changed in how
// it starts restarts under its session, one changed otherwise is replaced,
// and an untouched server's request in flight is answered.
func TestReload(t *testing.T) {
	keep, change, replace, gone := fake(t, "keep", "k"), fake(t, "change", "c1"), fake(t, "replace", "r"), fake(t, "gone", "g")
	next := daemon.Reloaded{Ignored: []string{"[listen]"}}
	r := start(t, daemon.Config{
		Servers: []daemon.Server{keep, change, replace, gone},
		Reload:  func() (daemon.Reloaded, error) { return next, nil },
	})
	ck, cc, cr, cg := dial(t, r.socket("keep")), dial(t, r.socket("change")), dial(t, r.socket("replace")), dial(t, r.socket("gone"))
	before, _, err := cc.whoami("1")
	require.NoError(t, err)
	ck.request(`"held"`, "hold")
	testutil.Until(t, within, "the held request is in flight", func() bool {
		for _, s := range r.status(t).Servers {
			if s.Name == "keep" {
				return s.Inflight == 1
			}
		}
		return false
	})

	changed := fake(t, "change", "c2")
	replaced := replace
	replaced.Hub.MaxSessions = 5
	next.Servers = []daemon.Server{keep, changed, replaced, fake(t, "new", "n")}
	res, err := r.d.Reload(t.Context())
	require.NoError(t, err)
	assert.Equal(t, daemon.ReloadResult{
		Added: []string{"new"}, Removed: []string{"gone"}, Restarted: []string{"change"}, Replaced: []string{"replace"},
		Ignored: []string{"[listen]"},
	}, res)

	ck.request("2", "release")
	held, err := ck.await(`"held"`)
	require.NoError(t, err, "the untouched server's request in flight is answered")
	assert.JSONEq(t, `{"released":true}`, string(held))

	testutil.Eventually(t, within, "change runs anew under the same session", func() (bool, error) {
		pid, tag, err := cc.whoami(`"w"`)
		return err == nil && pid != before && tag == "c2", err
	})
	_, err = cg.await("0")
	assert.Error(t, err, "the removed server's session is closed")
	_, err = cr.await("0")
	assert.Error(t, err, "the replaced server's session is closed")
	_, err = os.Stat(r.socket("gone"))
	assert.True(t, os.IsNotExist(err), "the removed server's socket is gone: %v", err)
	_, tag, err := dial(t, r.socket("new")).whoami("1")
	assert.Equal(t, [2]any{nil, "n"}, [2]any{err, tag}, "the added server serves")
	_, _, err = dial(t, r.socket("replace")).whoami("1")
	assert.NoError(t, err, "the replacement serves")

	res, err = r.d.Reload(t.Context())
	require.NoError(t, err)
	assert.Equal(t, daemon.ReloadResult{Ignored: []string{"[listen]"}}, res, "nothing changed the second time")
}

// TestReloadRefused: a config that does not load changes nothing, and POST
// /reload says why.
// TestReloadKeepsTheOthers: a reload that only restarts one server, or
// that changes nothing, or only adds one, keeps every other server serving
// its sessions.
func TestReloadKeepsTheOthers(t *testing.T) {
	a, b := fake(t, "a", "a1"), fake(t, "b", "b")
	next := daemon.Reloaded{Servers: []daemon.Server{a, b}}
	r := start(t, daemon.Config{
		Servers: []daemon.Server{a, b},
		Reload:  func() (daemon.Reloaded, error) { return next, nil },
	})
	cb := dial(t, r.socket("b"))
	served := func() []string {
		var names []string
		for _, s := range r.status(t).Servers {
			names = append(names, s.Name)
		}
		return names
	}
	for _, step := range []struct {
		name    string
		servers []daemon.Server
		want    daemon.ReloadResult
		served  []string
	}{
		{"nothing changed", []daemon.Server{a, b}, daemon.ReloadResult{}, []string{"a", "b"}},
		{"a restarts", []daemon.Server{fake(t, "a", "a2"), b}, daemon.ReloadResult{Restarted: []string{"a"}}, []string{"a", "b"}},
		{"c is added", []daemon.Server{fake(t, "a", "a2"), b, fake(t, "c", "c")}, daemon.ReloadResult{Added: []string{"c"}}, []string{"a", "b", "c"}},
	} {
		next.Servers = step.servers
		res, err := r.d.Reload(t.Context())
		require.NoError(t, err, step.name)
		assert.Equal(t, step.want, res, step.name)
		assert.Equal(t, step.served, served(), "%s: the servers served after it", step.name)
		_, tag, err := cb.whoami(`"` + step.name + `"`)
		assert.Equal(t, [2]any{nil, "b"}, [2]any{err, tag}, "%s: b still serves its session", step.name)
	}
}

// TestReloadChangesAToolViewInPlace: a reload that changes a server's
// tool view alone applies it to the running router: the session stays on
// the same process, hears that its tools changed, and a call to the tool
// now hidden is refused unknown_tool; a reload back shows it again.
func TestReloadChangesAToolViewInPlace(t *testing.T) {
	a := fake(t, "a", "a")
	next := daemon.Reloaded{Servers: []daemon.Server{a}}
	r := start(t, daemon.Config{
		Servers: []daemon.Server{a},
		Reload:  func() (daemon.Reloaded, error) { return next, nil },
	})
	c := dial(t, r.socket("a"))
	pid, _, err := c.whoami("1")
	require.NoError(t, err)
	call := func(id string) error {
		c.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"secret"}}`)
		_, err := c.await(id)
		return err
	}
	toolsChanged := func(what string) {
		t.Helper()
		c.conn.SetReadDeadline(time.Now().Add(within))
		for {
			line, err := c.r.ReadBytes('\n')
			require.NoError(t, err, "%s: the session hears that its tools changed", what)
			if strings.Contains(string(line), `"notifications/tools/list_changed"`) {
				return
			}
		}
	}
	require.NoError(t, call("2"), "visible before the reload")

	hidden := a
	hidden.Hub.Tools = mux.ToolView{Deny: []string{"sec*"}}
	next.Servers = []daemon.Server{hidden}
	res, err := r.d.Reload(t.Context())
	require.NoError(t, err)
	assert.Equal(t, daemon.ReloadResult{Retooled: []string{"a"}}, res)
	toolsChanged("hidden")
	err = call("3")
	require.Error(t, err, "hidden after the reload")
	assert.Contains(t, err.Error(), `"reason":"unknown_tool"`)

	next.Servers = []daemon.Server{a}
	res, err = r.d.Reload(t.Context())
	require.NoError(t, err)
	assert.Equal(t, daemon.ReloadResult{Retooled: []string{"a"}}, res)
	toolsChanged("shown again")
	assert.NoError(t, call("4"), "visible again")
	after, _, err := c.whoami("5")
	require.NoError(t, err)
	assert.Equal(t, pid, after, "the same process all along")
}

func TestReloadRefused(t *testing.T) {
	r := start(t, daemon.Config{
		Servers: []daemon.Server{fake(t, "a", "a")},
		Reload:  func() (daemon.Reloaded, error) { return daemon.Reloaded{}, errors.New("mux.toml:2: bad") },
	})
	c := dial(t, r.socket("a"))
	code, body, err := r.control(http.MethodPost, "/reload")
	require.NoError(t, err)
	assert.Equal(t, [2]any{http.StatusBadRequest, `{"error":"reload refused, the running config stays: mux.toml:2: bad"}`},
		[2]any{code, strings.TrimSpace(string(body))})
	_, _, err = c.whoami("1")
	assert.NoError(t, err, "the server still serves its session")
}

// TestReloadChecks: a reload of servers with one name twice is refused; a
// daemon with no Reload refuses it; a daemon not running cannot reload.
func TestReloadChecks(t *testing.T) {
	twice := daemon.Reloaded{Servers: []daemon.Server{fake(t, "a", "1"), fake(t, "a", "2")}}
	r := start(t, daemon.Config{Reload: func() (daemon.Reloaded, error) { return twice, nil }})
	_, err := r.d.Reload(t.Context())
	assert.ErrorContains(t, err, `server "a" configured twice`)

	r = start(t, daemon.Config{})
	code, body, err := r.control(http.MethodPost, "/reload")
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, code, "%s", body)

	d, err := daemon.New(daemon.Config{SocketDir: testutil.ShortDir(t)})
	require.NoError(t, err)
	_, err = d.Reload(t.Context())
	assert.ErrorIs(t, err, daemon.ErrNotRunning)
}

// TestIdleExit: with no session for IdleExit, Run returns nil by itself.
func TestIdleExit(t *testing.T) {
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "a", "a")}, IdleExit: 300 * time.Millisecond})
	c := dial(t, r.socket("a"))
	_, _, err := c.whoami("1")
	require.NoError(t, err)
	select {
	case err := <-r.done:
		t.Fatalf("Run returned with a session open: %v", err)
	case <-time.After(600 * time.Millisecond): // twice IdleExit with a session: no exit
	}
	c.conn.Close()
	select {
	case err := <-r.done:
		r.done <- err
		assert.NoError(t, err)
		assert.Contains(t, r.log.String(), "no sessions: exiting")
	case <-time.After(within):
		t.Fatal("Run did not exit when idle")
	}
}

// TestShutdown: when ctx ends, Run closes the sessions, stops the
// processes and removes the sockets before it returns.
func TestShutdown(t *testing.T) {
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "a", "a")}})
	c := dial(t, r.socket("a"))
	pid, _, err := c.whoami("1")
	require.NoError(t, err)
	r.stop()
	select {
	case err := <-r.done:
		r.done <- err
		require.NoError(t, err)
	case <-time.After(within):
		t.Fatal("Run did not return after its context ended")
	}
	assert.False(t, alive(pid), "the server's process is stopped and reaped")
	_, err = c.await("0")
	assert.Error(t, err, "the session is closed")
	for _, name := range []string{"a.sock", daemon.ControlSocket} {
		_, err := os.Stat(filepath.Join(r.dir, name))
		assert.True(t, os.IsNotExist(err), "%s is removed: %v", name, err)
	}
	log := r.log.String()
	assert.Less(t, strings.Index(log, "mcpmux shutting down"), strings.Index(log, "mcpmux stopped"), "log:\n%s", log)
}

// TestSecondDaemonRefused: the control socket is the lock on the folder.
func TestSecondDaemonRefused(t *testing.T) {
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "a", "a")}})
	d, err := daemon.New(daemon.Config{SocketDir: r.dir, Servers: []daemon.Server{fake(t, "b", "b")}})
	require.NoError(t, err)
	err = d.Run(t.Context())
	var inUse *daemon.InUseError
	require.ErrorAs(t, err, &inUse)
	assert.Equal(t, "another mcpmux is already serving "+r.dir, err.Error())
	assert.ErrorIs(t, err, socket.ErrInUse)
	_, err = os.Stat(r.socket("b"))
	assert.True(t, os.IsNotExist(err), "no socket of the refused daemon: %v", err)
	assert.Error(t, d.Run(t.Context()), "Run runs once")
}

// TestServerSocketInUse: a server socket served by someone else stops the
// start, and what was opened is closed.
func TestServerSocketInUse(t *testing.T) {
	dir := filepath.Join(testutil.ShortDir(t), "s")
	require.NoError(t, socket.PrepareDir(dir))
	l, err := socket.ListenUnix(filepath.Join(dir, "a.sock"))
	require.NoError(t, err)
	defer l.Close()
	d, err := daemon.New(daemon.Config{SocketDir: dir, Servers: []daemon.Server{fake(t, "a", "a")}})
	require.NoError(t, err)
	err = d.Run(t.Context())
	assert.EqualError(t, err, "another mcpmux is already serving "+filepath.Join(dir, "a.sock"))
	_, err = os.Stat(filepath.Join(dir, daemon.ControlSocket))
	assert.True(t, os.IsNotExist(err), "the control socket is closed again: %v", err)
}

// TestInherited: a passed socket serves its server; one no server takes
// is closed.
func TestInherited(t *testing.T) {
	dir := filepath.Join(testutil.ShortDir(t), "s")
	require.NoError(t, socket.PrepareDir(dir))
	passed, err := socket.ListenUnix(filepath.Join(dir, "a.sock"))
	require.NoError(t, err)
	unused, err := socket.ListenUnix(filepath.Join(dir, "other.sock"))
	require.NoError(t, err)
	r := start(t, daemon.Config{SocketDir: dir, Servers: []daemon.Server{fake(t, "a", "a")},
		Inherited: map[string]*socket.Listener{passed.Addr().String(): passed, unused.Addr().String(): unused}})
	_, tag, err := dial(t, r.socket("a")).whoami("1")
	assert.Equal(t, [2]any{nil, "a"}, [2]any{err, tag})
	log := r.log.String()
	assert.Contains(t, log, "using the socket the service manager passed")
	assert.Contains(t, log, "the service manager passed a socket no server uses; closing it")
	_, err = unused.Accept()
	assert.Error(t, err, "the unused socket is closed")
}

// TestWeb: the web listener serves the servers by name behind its token;
// one that cannot open is a *WebError.
func TestWeb(t *testing.T) {
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "a", "a")},
		Web: &socket.WebConfig{Addr: "127.0.0.1:0", Token: "tok"}})
	m := webURL(r.log.String())
	require.NotEmpty(t, m, "the web listener's address is logged")
	for _, tt := range []struct {
		path, token string
		want        int
	}{{"/servers/a", "", http.StatusUnauthorized}, {"/servers/nope", "tok", http.StatusNotFound}} {
		req, err := http.NewRequest(http.MethodGet, "http://"+m+tt.path, nil)
		require.NoError(t, err)
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, tt.want, resp.StatusCode, "GET %s with token %q", tt.path, tt.token)
	}
	http.DefaultClient.CloseIdleConnections()

	d, err := daemon.New(daemon.Config{SocketDir: filepath.Join(testutil.ShortDir(t), "s"), Web: &socket.WebConfig{Addr: "127.0.0.1:notaport", Token: "t"}})
	require.NoError(t, err)
	err = d.Run(t.Context())
	var we *daemon.WebError
	require.ErrorAs(t, err, &we)
	assert.Equal(t, "127.0.0.1:notaport", we.Addr)
}

// webURL finds the host:port the daemon logged for its web listener.
func webURL(log string) string {
	_, rest, ok := strings.Cut(log, "url=ws://")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// TestNewChecks: New refuses a config Run could not serve.
func TestNewChecks(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  daemon.Config
		want string
	}{
		{"no folder", daemon.Config{}, "daemon: no socket folder"},
		{"a name twice", daemon.Config{SocketDir: "/x", Servers: []daemon.Server{{Hub: mux.Config{Name: "a"}}, {Hub: mux.Config{Name: "a"}}}}, `daemon: server "a" configured twice`},
		{"a path for a name", daemon.Config{SocketDir: "/x", Servers: []daemon.Server{{Hub: mux.Config{Name: "../a"}}}}, `daemon: server name "../a" cannot name a socket`},
		{"no name", daemon.Config{SocketDir: "/x", Servers: []daemon.Server{{}}}, `daemon: server name "" cannot name a socket`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := daemon.New(tt.cfg)
			assert.EqualError(t, err, tt.want)
		})
	}
}

// TestReady: Ready is called once, when the control socket is taken and
// before any server's socket opens; GET /status names the config file.
func TestReady(t *testing.T) {
	dir := filepath.Join(testutil.ShortDir(t), "s")
	type seen struct{ control, server bool }
	calls := make(chan seen, 2)
	r := start(t, daemon.Config{
		SocketDir:  dir,
		Servers:    []daemon.Server{fake(t, "a", "a")},
		ConfigFile: "/etc/mux.toml",
		Ready: func() {
			_, cerr := os.Stat(filepath.Join(dir, daemon.ControlSocket))
			_, serr := os.Stat(filepath.Join(dir, "a.sock"))
			calls <- seen{cerr == nil, serr == nil}
		},
	})
	st := r.status(t)
	assert.Equal(t, "/etc/mux.toml", st.Config, "GET /status names the config file")
	require.Len(t, calls, 1, "Ready is called once")
	assert.Equal(t, seen{true, false}, <-calls, "Ready comes with the control socket, before a server's")
}

// TestRunKeepsItsRecord: with a state folder and a config file, Run writes
// the daemon's record once it holds the socket folder, keeps the servers'
// memory there, and removes the record when it returns.
func TestRunKeepsItsRecord(t *testing.T) {
	state := t.TempDir()
	conf := filepath.Join(t.TempDir(), "mux.toml")
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "a", "a")}, StateDir: state, ConfigFile: conf, Version: "v-test", Autostarted: true})
	rec, ok := daemon.ReadRecord(state, conf)
	require.True(t, ok, "the record is written before the control socket answers")
	assert.Equal(t, [5]any{conf, r.dir, os.Getpid(), "v-test", true}, [5]any{rec.Config, rec.SocketDir, rec.Pid, rec.Version, rec.Autostarted}, "the record")

	dial(t, r.socket("a"))
	testutil.Until(t, within, "server a's description is remembered", func() bool {
		found, _ := filepath.Glob(filepath.Join(state, "servers", "*", "description.json"))
		return len(found) == 1
	})

	r.stop()
	select {
	case err := <-r.done:
		r.done <- err
		require.NoError(t, err)
	case <-time.After(within):
		t.Fatal("Run did not return after its context ended")
	}
	_, ok = daemon.ReadRecord(state, conf)
	assert.False(t, ok, "the record is removed when Run returns")
}
