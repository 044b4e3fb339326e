package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// The resilience tier: servers that crash, loop, hang, flood stdout or
// outlive their daemon, driven through the real binary.

// gone reports whether pid no longer runs: no such process, or a zombie
// nobody has reaped yet (its code no longer runs).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err)
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// daemonStatus runs `mcpmux status --json`.
type daemonStatus struct {
	Pid        int    `json:"pid"`
	Goroutines int    `json:"goroutines"`
	RSSBytes   uint64 `json:"rss_bytes"`
	HeapBytes  uint64 `json:"heap_bytes"`
	Servers    []struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		Pid      int    `json:"pid"`
		Restarts int    `json:"restarts"`
		Sessions int    `json:"sessions"`
		Inflight int    `json:"inflight"`
		LastExit string `json:"last_exit"`

		SessionList []struct {
			Client   string `json:"client"`
			Protocol string `json:"protocol"`
		} `json:"session_list"`
	} `json:"servers"`
}

func status(tb testing.TB, cfg string, env ...string) daemonStatus {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := mcpmux(ctx, "status", "--json", "--config", cfg)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.Output()
	require.NoError(tb, err, "mcpmux status --json")
	var st daemonStatus
	require.NoError(tb, json.Unmarshal(out, &st), "status: %s", out)
	return st
}

func (st daemonStatus) server(name string) (state string, pid int) {
	for _, s := range st.Servers {
		if s.Name == name {
			return s.State, s.Pid
		}
	}
	return "", 0
}

// treePids asks the demo server for its pid and its grandchild's.
func treePids(tb testing.TB, c *client) (pid, grandchild int) {
	tb.Helper()
	m, err := c.tool(`"tree"`, "stats", nil)
	require.NoError(tb, err)
	var st struct {
		PID        int `json:"pid"`
		Grandchild int `json:"grandchild"`
	}
	require.NoError(tb, decodeStructured(m, &st))
	return st.PID, st.Grandchild
}

// TestKilledFromOutside: SIGKILL of the server mid-request. The request
// fails at once; the sessions stay; the restarted process serves them and
// was initialized once, by mcpmux.
func TestKilledFromOutside(t *testing.T) {
	d := startDaemon(t, demo("demo", nil, `restart_backoff = "10ms"`), "")
	a, b := open(t, d.socket("demo")), open(t, d.socket("demo"))
	first := a.mustStats(t)

	require.NoError(t, a.send(toolCall(`"long"`, "slow", map[string]any{"ms": 10000})))
	testutil.Eventually(t, 5*time.Second, "the slow call in flight", func() (bool, error) {
		st, err := b.stats()
		return slices.Contains(st.Methods, "tools/call") && st.Requests >= 3, err
	})
	start := time.Now()
	require.NoError(t, syscall.Kill(first.PID, syscall.SIGKILL))
	m, _, err := a.await(`"long"`)
	require.NoError(t, err)
	delay := time.Since(start)
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, []any{-32603, "upstream_exited"}, []any{e.Code, e.Data.Reason})
	assert.Contains(t, e.Message, "killed")
	t.Logf("error reached the session %v after SIGKILL", delay)
	assert.Less(t, delay, 5*time.Second)

	for _, c := range []*client{a, b} {
		st := c.mustStats(t) // waits for the restart; list_changed notifications are skipped
		assert.NotEqual(t, first.PID, st.PID, "a new process")
		assert.Equal(t, 1, st.Initialize, "mcpmux initialized the new process once: two in all")
	}
}

// TestHundredCrashCycles: 100 crashes and restarts with sessions attached
// and requests flowing. No session is lost, every request is answered, and
// the daemon's goroutines and memory stay flat.
func TestHundredCrashCycles(t *testing.T) {
	cycles := 100
	if testing.Short() {
		cycles = 10
	}
	d := startDaemon(t, demo("demo", nil, `max_restarts = 0`, `restart_backoff = "10ms"`, `restart_backoff_max = "20ms"`), "")
	crasher, worker := open(t, d.socket("demo")), open(t, d.socket("demo"))

	// The worker keeps requests flowing: each must be answered, with a
	// result or with one of the errors a restart explains.
	stop := make(chan struct{})
	var answered, failed int
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf(`"w%d"`, i)
			m, err := worker.tool(id, "echo", map[string]any{"text": id})
			if !assert.NoError(t, err, "worker request %s unanswered", id) {
				return
			}
			if m.Kind == jsonrpc.KindResult {
				answered++
				continue
			}
			e, _ := errorOf(m)
			if !assert.Contains(t, []string{"upstream_exited", "upstream_unavailable"}, e.Data.Reason, "worker request %s: %s", id, m.Frame) {
				return
			}
			failed++
		}
	})

	var early daemonStatus
	for i := range cycles {
		m, err := crasher.tool(fmt.Sprintf(`"crash%d"`, i), "crash", nil)
		require.NoError(t, err, "cycle %d", i)
		e, err := errorOf(m)
		require.NoError(t, err, "cycle %d", i)
		require.Equal(t, "upstream_exited", e.Data.Reason, "cycle %d", i)
		crasher.mustStats(t) // served again
		if i == 9 {
			early = status(t, d.path)
		}
	}
	close(stop)
	wg.Wait()
	late := status(t, d.path)
	t.Logf("after 10 cycles: %d goroutines, %.1f MiB resident, %.1f MiB heap", early.Goroutines, float64(early.RSSBytes)/(1<<20), float64(early.HeapBytes)/(1<<20))
	t.Logf("after %d cycles: %d goroutines, %.1f MiB resident, %.1f MiB heap", cycles, late.Goroutines, float64(late.RSSBytes)/(1<<20), float64(late.HeapBytes)/(1<<20))
	t.Logf("worker: %d answered, %d failed by a restart", answered, failed)
	assert.InDelta(t, early.Goroutines, late.Goroutines, 10, "goroutines stay flat")
	assert.Less(t, late.HeapBytes, 2*early.HeapBytes+8<<20, "the heap stays flat")
	_, pid := late.server("demo")
	assert.NotZero(t, pid)
	for _, s := range late.Servers {
		assert.Equal(t, 2, s.Sessions, "no session was lost")
		assert.GreaterOrEqual(t, s.Restarts, cycles)
	}
}

// stubborn is a server that ignores stdin EOF and SIGTERM, with a grandchild
// that ignores SIGTERM too.
func stubborn() string {
	return demo("demo", []string{"--ignore-eof", "--ignore-sigterm", "--grandchild"}, `stdin_grace = "300ms"`, `term_grace = "300ms"`)
}

// TestNoOrphansAfterSIGTERM: the daemon is stopped; the whole tree is gone
// within stdin_grace + term_grace + 1 s.
func TestNoOrphansAfterSIGTERM(t *testing.T) {
	d := startDaemon(t, stubborn(), "")
	pid, grandchild := treePids(t, open(t, d.socket("demo")))
	require.NotZero(t, grandchild)
	start := time.Now()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	took := testutil.Eventually(t, 300*time.Millisecond+300*time.Millisecond+time.Second, "the server and its grandchild gone", func() (bool, error) {
		return gone(pid) && gone(grandchild), nil
	})
	select {
	case <-d.exited:
	case <-time.After(stopTimeout):
		t.Fatal("mcpmux serve did not exit after SIGTERM")
	}
	t.Logf("tree gone %v after SIGTERM; daemon exited after %v", took, time.Since(start))
	assert.NoError(t, d.waitErr, "exit 0")
}

// TestNoOrphansAfterSIGKILL: the daemon dies without a word; its reapers
// take the tree down within 2 s.
func TestNoOrphansAfterSIGKILL(t *testing.T) {
	d := startDaemon(t, stubborn(), "")
	pid, grandchild := treePids(t, open(t, d.socket("demo")))
	require.NotZero(t, grandchild)
	d.kill()
	took := testutil.Eventually(t, 2*time.Second, "the server and its grandchild gone", func() (bool, error) {
		return gone(pid) && gone(grandchild), nil
	})
	t.Logf("tree gone %v after SIGKILL of the daemon", took)
}

// TestStalledServer: a server stops reading its stdin while a client keeps
// writing. It is restarted, its requests fail with upstream_stalled, and a
// second server keeps serving its own session throughout.
func TestStalledServer(t *testing.T) {
	d := startDaemon(t, demo("hung", nil, `write_stall_timeout = "500ms"`, `restart_backoff = "10ms"`)+demo("ok", nil), "")
	hung, ok := open(t, d.socket("hung")), open(t, d.socket("ok"))
	first := hung.mustStats(t)
	m, err := hung.tool(`"stop"`, "stop_reading", nil)
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindResult, m.Kind)

	// 64 requests of 64 KiB: more than the pipe and the server's buffer
	// hold. They are sent while the answers are read (below): those that
	// reach the restarted server come back as 64 KiB echoes, and a client
	// that read nothing until it had sent everything would be paused by
	// mcpmux's flow control, as it should be, before it had.
	text := strings.Repeat("x", 64<<10)
	var ids []string
	for i := range 64 {
		ids = append(ids, fmt.Sprintf(`"big%d"`, i))
	}
	sent := make(chan error, 1) // buffered: the sender never waits for the receive
	go func() {                 // ends by its last send or its write deadline; received below
		for _, id := range ids {
			if err := hung.send(toolCall(id, "echo", map[string]any{"text": text})); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()

	// Meanwhile the other server answers at its usual pace.
	var lat []time.Duration
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range 100 {
			start := time.Now()
			if !assert.NoError(t, ok.echo(fmt.Sprintf(`"ok%d"`, i), "hi")) {
				return
			}
			lat = append(lat, time.Since(start))
		}
	})

	stalled := 0
	for range ids {
		m, err := hung.read()
		require.NoError(t, err)
		if m.Kind == jsonrpc.KindNotification {
			continue
		}
		if e, err := errorOf(m); err == nil && e.Data.Reason == "upstream_stalled" {
			stalled++
		}
	}
	wg.Wait()
	require.NoError(t, <-sent, "sending the requests")
	assert.Positive(t, stalled, "requests failed with upstream_stalled")
	st := hung.mustStats(t)
	assert.NotEqual(t, first.PID, st.PID, "the stalled server was restarted")
	slices.Sort(lat)
	if assert.Len(t, lat, 100) {
		t.Logf("the other server's echo during the stall: p50 %v, p99 %v; %d requests failed upstream_stalled", lat[50], lat[98], stalled)
	}
	assert.Contains(t, d.log(), "stalled")
}

// TestCrashLoopFails: a server that dies at every start reaches failed
// within its window; status shows it; requests are refused at once; restart
// brings it back once it can start.
func TestCrashLoopFails(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "crash")
	d := startDaemon(t, demo("loop", []string{"--crash-if-exists", marker}, `max_restarts = 3`, `restart_backoff = "10ms"`, `restart_window = "60s"`), "")
	c := open(t, d.socket("loop"))
	require.NoError(t, os.WriteFile(marker, nil, 0o600))
	m, err := c.tool(`"die"`, "crash", nil)
	require.NoError(t, err)
	require.Equal(t, jsonrpc.KindError, m.Kind)

	took := testutil.Eventually(t, 10*time.Second, "the failed state", func() (bool, error) {
		state, _ := status(t, d.path).server("loop")
		return state == "failed", nil
	})
	t.Logf("failed %v after the first crash", took)

	start := time.Now()
	m, err = c.tool(`"refused"`, "echo", map[string]any{"text": "x"})
	require.NoError(t, err)
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, []any{-32603, "upstream_unavailable", "loop"}, []any{e.Code, e.Data.Reason, e.Data.Server})
	assert.Contains(t, e.Message, "failed")
	t.Logf("refused in %v", time.Since(start))
	assert.Less(t, time.Since(start), time.Second, "refused at once")

	require.NoError(t, os.Remove(marker))
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "restart", "--config", d.path, "loop").CombinedOutput()
	require.NoError(t, err, "mcpmux restart: %s", out)
	testutil.Eventually(t, 10*time.Second, "ready again", func() (bool, error) {
		state, _ := status(t, d.path).server("loop")
		return state == "ready", nil
	})
	assert.NoError(t, c.echo(`"back"`, "hello"), "the same session is served again")
}

// TestJunkFloodRestarts: more junk lines in a row than max_junk_lines is a
// broken server: it is restarted and service resumes.
func TestJunkFloodRestarts(t *testing.T) {
	d := startDaemon(t, demo("demo", nil, `max_junk_lines = 5`, `restart_backoff = "10ms"`), "")
	c := open(t, d.socket("demo"))
	first := c.mustStats(t)
	m, err := c.tool(`"flood"`, "junk", map[string]any{"lines": 50})
	require.NoError(t, err)
	e, err := errorOf(m)
	require.NoError(t, err)
	assert.Equal(t, "upstream_exited", e.Data.Reason)
	st := c.mustStats(t)
	assert.NotEqual(t, first.PID, st.PID, "restarted")
	assert.NoError(t, c.echo(`"after"`, "still here"))
	assert.Contains(t, d.log(), "junk")
}
