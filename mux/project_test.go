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
		IdleTimeout: 50 * time.Millisecond, start: srv.start, IDs: new(atomic.Uint64)})
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
