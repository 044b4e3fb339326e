package mux

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

func TestProjectRoot(t *testing.T) {
	top := t.TempDir()
	repo := filepath.Join(top, "repo")
	deep := filepath.Join(repo, "a", "b")
	plain := filepath.Join(top, "plain", "x")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".git"), 0o700))
	require.NoError(t, os.MkdirAll(deep, 0o700))
	require.NoError(t, os.MkdirAll(plain, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(top, "plain", "go.mod"), nil, 0o600))
	assert.Equal(t, repo, ProjectRoot(repo, DefaultProjectMarkers))
	assert.Equal(t, repo, ProjectRoot(deep, DefaultProjectMarkers))
	assert.Equal(t, plain, ProjectRoot(plain, DefaultProjectMarkers), "no marker above: the folder itself")
	assert.Equal(t, filepath.Join(top, "plain"), ProjectRoot(plain, []string{"go.mod"}), "another marker")
}

// share = "project": sessions from one repository, its root or a folder
// inside it, share one process that runs in the root; another repository
// gets a process of its own; each stops idle_timeout after its last
// session.
func TestProjectsShareAProcessPerProject(t *testing.T) {
	top := t.TempDir()
	a, b := filepath.Join(top, "a"), filepath.Join(top, "b")
	for _, d := range []string{filepath.Join(a, ".git"), filepath.Join(a, "src"), filepath.Join(b, ".git")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	srv := newFakeServer()
	projects := NewProjects(Config{Name: "proj", Upstream: upstream.Config{MaxMessageBytes: 1 << 20, Args: []string{"--root={project}"}},
		IdleTimeout: 50 * time.Millisecond, ProjectRoots: []string{top}, start: srv.start, IDs: new(atomic.Uint64)})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { projects.Run(ctx) })
	h := &harness{t: t, srv: srv, ctx: ctx}
	t.Cleanup(func() { cancel(); h.wg.Wait(); wg.Wait() })
	attach := func(dir string) *testClient {
		c := h.pipe(func(conn net.Conn) {
			projects.Serve(ctx, session.NewStream(conn, 1<<20), session.Peer{Transport: "test", Dir: dir})
		})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
		require.Equal(t, jsonrpc.KindResult, c.recv().Kind)
		return c
	}
	c1, c2, c3 := attach(a), attach(filepath.Join(a, "src")), attach(b)
	assert.Equal(t, 2, srv.started(), "one process for a, one for b")
	srv.mu.Lock()
	dirs, args := append([]string(nil), srv.dirs...), srv.lastArgs
	srv.mu.Unlock()
	assert.ElementsMatch(t, []string{a, b}, dirs, "each runs in its project's root")
	assert.Contains(t, []string{"--root=" + a, "--root=" + b}, args[0], "{project} replaced")
	st := projects.Status()
	require.Len(t, st.Instances, 2)
	assert.Equal(t, []any{a, 2, b, 1}, []any{st.Instances[0].Project, st.Instances[0].Sessions, st.Instances[1].Project, st.Instances[1].Sessions})
	assert.Equal(t, 3, st.Sessions)

	for _, c := range []*testClient{c1, c2, c3} {
		c.conn.Close()
	}
	eventually(t, "both instances stopped after idle_timeout", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for _, p := range srv.procs {
			if !p.closed.Load() {
				return false
			}
		}
		return len(projects.Status().Instances) == 0
	})
	// A session of a stopped project starts it again.
	attach(b)
	assert.Equal(t, 3, srv.started())
}

// A web client has no folder mcpmux can see: with share = "project" its
// roots tell its project. It gets one initialize answer, mcpmux's
// roots/list after its notifications/initialized, and then the hub of the
// project its first file:// root is in serves it, the frames it sent
// meanwhile included. A client that declares no roots, or does not answer
// in time, is served in the daemon's folder.
func TestProjectsTellAWebClientsProjectByItsRoots(t *testing.T) {
	defer func(w time.Duration) { lobbyWait = w }(lobbyWait)
	lobbyWait = 300 * time.Millisecond
	top := t.TempDir()
	a, b, home := filepath.Join(top, "a"), filepath.Join(top, "b"), filepath.Join(top, "home")
	for _, d := range []string{filepath.Join(a, ".git"), filepath.Join(b, ".git"), filepath.Join(b, "src"), home} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	srv := newFakeServer()
	projects := NewProjects(Config{Name: "proj", Upstream: upstream.Config{MaxMessageBytes: 1 << 20, Dir: home},
		ProjectRoots: []string{top}, start: srv.start, IDs: new(atomic.Uint64)})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { projects.Run(ctx) })
	h := &harness{t: t, srv: srv, ctx: ctx}
	t.Cleanup(func() { cancel(); h.wg.Wait(); wg.Wait() })
	attach := func(dir string) *testClient {
		return h.pipe(func(conn net.Conn) {
			projects.Serve(ctx, session.NewStream(conn, 1<<20), session.Peer{Transport: "test", Dir: dir})
		})
	}
	const rootsInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}}}}`
	// Nothing describes the server yet: a client of a's folder starts a's
	// process.
	local := attach(a)
	local.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	require.Equal(t, jsonrpc.KindResult, local.recv().Kind)
	eventually(t, "a's process described", func() bool { return projects.description() != nil })

	web := attach("")
	web.send(rootsInit)
	init := web.recv()
	require.Equal(t, jsonrpc.KindResult, init.Kind, "%s", init.Frame)
	assert.Contains(t, string(init.Result), `"protocolVersion":"2025-11-25"`)
	web.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"early","method":"echo","params":{"sent":"before the roots"}}`)
	ask := web.recv()
	require.Equal(t, "roots/list", ask.Method)
	web.send(`{"jsonrpc":"2.0","id":` + string(ask.ID) + `,"result":{"roots":[{"uri":"file://` + filepath.Join(b, "src") + `"}]}}`)
	m := web.answer()
	assert.Equal(t, `"early"`, string(m.ID), "the request sent before the roots, answered (and no second initialize answer): %s", m.Frame)
	quiet(t, web, "nothing more")
	srv.mu.Lock()
	dirs := append([]string(nil), srv.dirs...)
	srv.mu.Unlock()
	assert.Equal(t, []string{a, b}, dirs, "the web client's process runs in its project's root")

	// No roots declared: the daemon's folder.
	plain := attach("")
	plain.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	require.Equal(t, jsonrpc.KindResult, plain.recv().Kind)
	quiet(t, plain, "served")
	// Roots declared, never told: the daemon's folder, after lobbyWait.
	mute := attach("")
	mute.send(rootsInit, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, jsonrpc.KindResult, mute.recv().Kind)
	require.Equal(t, "roots/list", mute.recv().Method)
	quiet(t, mute, "served once the lobby gave up")
	st := projects.Status()
	var roots []string
	for _, in := range st.Instances {
		roots = append(roots, in.Project)
	}
	assert.ElementsMatch(t, []string{a, b, home}, roots)
}

// Projects within bounds: a folder outside project_roots (or one that does
// not exist) is served in the daemon's folder, a symlink to a project is
// that project, and past max_projects a new project stops the one idle for
// longest, or is refused naming the key when every one has sessions.
func TestProjectsWithinBounds(t *testing.T) {
	top, outside := t.TempDir(), t.TempDir()
	home := filepath.Join(top, "home")
	var repos []string
	for _, n := range []string{"a", "b", "c", "d"} {
		repos = append(repos, filepath.Join(top, n))
		require.NoError(t, os.MkdirAll(filepath.Join(top, n, ".git"), 0o700))
	}
	require.NoError(t, os.MkdirAll(home, 0o700))
	link := filepath.Join(top, "link-to-a")
	require.NoError(t, os.Symlink(repos[0], link))
	srv := newFakeServer()
	projects := NewProjects(Config{Name: "proj", Upstream: upstream.Config{MaxMessageBytes: 1 << 20, Dir: home},
		IdleTimeout: time.Hour, MaxProjects: 2, ProjectRoots: []string{top}, start: srv.start, IDs: new(atomic.Uint64)})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { projects.Run(ctx) })
	h := &harness{t: t, srv: srv, ctx: ctx}
	t.Cleanup(func() { cancel(); h.wg.Wait(); wg.Wait() })
	attach := func(dir string) (*testClient, *jsonrpc.Message) {
		c := h.pipe(func(conn net.Conn) {
			projects.Serve(ctx, session.NewStream(conn, 1<<20), session.Peer{Transport: "test", Dir: dir})
		})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
		return c, c.recv()
	}
	projectsNow := func() []string {
		var out []string
		for _, in := range projects.Status().Instances {
			out = append(out, in.Project)
		}
		return out
	}

	c1, m := attach(outside)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	_, m = attach(filepath.Join(top, "no-such-folder"))
	require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	assert.Equal(t, []string{home}, projectsNow(), "outside project_roots, or not there: the daemon's folder")
	c1.conn.Close()

	a1, m := attach(link)
	require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	a2, m := attach(repos[0])
	require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	assert.ElementsMatch(t, []string{home, repos[0]}, projectsNow(), "a symlink to a is a")

	// The daemon's folder still has a session, and so has a: a third
	// project is refused, naming max_projects, before it says anything
	// (its initialize could meet a closed connection).
	refused := h.pipe(func(conn net.Conn) {
		projects.Serve(ctx, session.NewStream(conn, 1<<20), session.Peer{Transport: "test", Dir: repos[1]})
	})
	m = refused.recv()
	require.Equal(t, jsonrpc.KindError, m.Kind, "%s", m.Frame)
	assert.Contains(t, string(m.Error), "max_projects")
	assert.Contains(t, string(m.Error), `"reason":"too_many_sessions"`)
	assert.ElementsMatch(t, []string{home, repos[0]}, projectsNow())

	// Once a has no session, b stops it to start: a's process ends first.
	a1.conn.Close()
	a2.conn.Close()
	eventually(t, "a without sessions", func() bool {
		for _, in := range projects.Status().Instances {
			if in.Project == repos[0] && in.Sessions == 0 {
				return true
			}
		}
		return false
	})
	_, m = attach(repos[1])
	require.Equal(t, jsonrpc.KindResult, m.Kind, "%s", m.Frame)
	assert.ElementsMatch(t, []string{home, repos[1]}, projectsNow(), "a made room for b")
	srv.mu.Lock()
	live := 0
	for _, p := range srv.procs {
		if !p.closed.Load() {
			live++
		}
	}
	srv.mu.Unlock()
	assert.Equal(t, 2, live, "never more than max_projects processes")
}
