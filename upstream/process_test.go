//go:build unix

package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

func TestEchoRoundTrip(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, reaper []string) {
		cfg := fakeConfig(t, "echo", "")
		cfg.Reaper = reaper
		p, rec, logs := start(t, cfg)
		rec.waitReady(t)

		m := call(t, p, rec, 1, "tools/list")
		assert.Equal(t, jsonrpc.KindResult, m.Kind)
		assert.Equal(t, `{}`, string(m.Result))

		require.NoError(t, p.Stop(t.Context()))
		assert.Equal(t, upstream.Exit{Code: 0, Reason: upstream.ReasonStopped}, p.Exit())
		assert.Equal(t, "exit status 0 (stopped)", p.Exit().String())

		exe, err := os.Executable()
		require.NoError(t, err)
		started := logs.records("server started")
		require.Len(t, started, 1)
		want := map[string]string{"server": "test", "pid": strconv.Itoa(p.Pid()), "command": exe}
		if reaper != nil {
			assert.NotEqual(t, want["pid"], started[0].Attrs["reaper"])
			want["reaper"] = started[0].Attrs["reaper"]
		}
		assert.Equal(t, want, started[0].Attrs)
		exited := logs.records("server exited")
		require.Len(t, exited, 1)
		assert.Equal(t, "exit status 0 (stopped)", exited[0].Attrs["exit"])
		assert.Empty(t, logs.atLeast(slog.LevelWarn), "a clean run logs no warnings")
	})
}

// The child sees only the allowlist from Environ, without shell functions,
// plus Env on top; none of the daemon's other variables reach it.
func TestEnvironmentAllowlist(t *testing.T) {
	t.Parallel()
	eachMode(t, testEnvironmentAllowlist)
}

func testEnvironmentAllowlist(t *testing.T, reaper []string) {
	cfg := fakeConfig(t, "env", "")
	cfg.Reaper = reaper
	cfg.Environ = []string{
		"HOME=/home/test",
		"PATH=/usr/bin:/bin",
		"SECRET_TOKEN=hunter2",
		"LANG=C.UTF-8",
		"BASH_FUNC_greet%%=() {  echo hi\n}",
		"SHELL=() { evil; }",
		"USER=someone",
		"TERM=xterm",
		"LC_ALL=C",
		"LOGNAME=first",
		"LOGNAME=second",
	}
	cfg.InheritEnv = []string{"LANG", "BASH_FUNC_greet%%", "NOT_SET"}
	cfg.Env["HOME"] = "/override"
	cfg.Env["EXTRA"] = "1"
	cfg.Dir = t.TempDir()
	p, rec, _ := start(t, cfg)

	m := call(t, p, rec, 1, "env")
	var got envResult
	require.NoError(t, json.Unmarshal(m.Result, &got))
	slices.Sort(got.Env)
	dir, err := filepath.EvalSymlinks(cfg.Dir)
	require.NoError(t, err)
	assert.Equal(t, envResult{
		Env: []string{
			"EXTRA=1",
			"GOCOVERDIR=" + cfg.Env["GOCOVERDIR"],
			"GORACE=atexit_sleep_ms=0",
			"HOME=/override",
			"LANG=C.UTF-8",
			"LOGNAME=second",
			"MCPMUX_TEST_ARG=",
			"MCPMUX_TEST_SERVER=env",
			"PATH=/usr/bin:/bin",
			"TERM=xterm",
			"USER=someone",
		},
		Dir: dir,
	}, got)
}

// A bare command name is looked up in the PATH of Environ (not the test's
// own), at every Start, skipping relative entries and files that are not
// executable.
func TestCommandLookup(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	const name = "mcpmux-fake-server"
	notExec, bin := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(notExec, name), []byte("#!/bin/sh\n"), 0o644))
	pathVar := strings.Join([]string{"/nonexistent", "relative/dir", "", notExec, bin}, ":")

	cfg := fakeConfig(t, "echo", "")
	cfg.Command = name
	cfg.Environ = []string{"PATH=" + pathVar}

	_, err = upstream.Start(cfg, new(recorder))
	require.Error(t, err, "nothing executable named %s yet", name)
	assert.ErrorIs(t, err, exec.ErrNotFound)
	assert.Equal(t, `start test: command "`+name+`" not found in PATH (`+pathVar+`)`, err.Error())

	require.NoError(t, os.Symlink(exe, filepath.Join(bin, name)))
	p, rec, logs := start(t, cfg)
	call(t, p, rec, 1, "ping")
	started := logs.records("server started")
	require.Len(t, started, 1)
	assert.Equal(t, filepath.Join(bin, name), started[0].Attrs["command"])
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	tests := []struct {
		name string
		cfg  upstream.Config
		h    upstream.Handler
		want string
	}{
		{"no command", upstream.Config{Name: "s"}, new(recorder), "start s: command is empty"},
		{"no handler", upstream.Config{Name: "s", Command: exe}, nil, "start s: no handler"},
		{"file mode without path", upstream.Config{Name: "s", Command: exe, Stderr: upstream.StderrFile}, new(recorder),
			"start s: stderr mode file needs a path"},
		{"inherit without writer", upstream.Config{Name: "s", Command: exe, Stderr: upstream.StderrInherit}, new(recorder),
			"start s: stderr mode inherit needs a writer"},
		{"bad env name", upstream.Config{Name: "s", Command: exe, Env: map[string]string{"A=B": "c"}}, new(recorder),
			`start s: env name "A=B" is not valid`},
		{"not found", upstream.Config{Name: "s", Command: "mcpmux-no-such-server", Environ: []string{"PATH=/nonexistent"}}, new(recorder),
			`start s: command "mcpmux-no-such-server" not found in PATH (/nonexistent)`},
		{"no PATH at all", upstream.Config{Name: "s", Command: "mcpmux-no-such-server"}, new(recorder),
			`start s: command "mcpmux-no-such-server" not found in PATH ()`},
		{"missing dir", upstream.Config{Name: "s", Command: exe, Dir: "/nonexistent/dir"}, new(recorder),
			"start s: working directory: stat /nonexistent/dir: no such file or directory"},
		{"dir is a file", upstream.Config{Name: "s", Command: exe, Dir: exe}, new(recorder),
			"start s: working directory " + exe + " is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := upstream.Start(tt.cfg, tt.h)
			assert.EqualError(t, err, tt.want)
			if err == nil {
				p.Kill("")
				<-p.Done()
			}
		})
	}
}

// In log mode each stderr line goes to the logger and the tail, a long
// line truncated; nothing of it reaches the Handler.
func TestStderrLog(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "stderr-long", "")
	cfg.StderrTailLines = 3
	p, rec, logs := start(t, cfg)
	rec.waitReady(t)

	long := strings.Repeat("x", 8<<10) + " …[truncated]"
	want := []string{"line 1", "line 2", "line 3", "line 4", "line 5", long, "after long"}
	require.Eventually(t, func() bool { return len(logs.records("server stderr")) == len(want) },
		patience, 5*time.Millisecond)
	var got []string
	for _, r := range logs.records("server stderr") {
		assert.Equal(t, slog.LevelInfo, r.Level)
		assert.Equal(t, "test", r.Attrs["server"])
		got = append(got, r.Attrs["stderr"])
	}
	assert.Equal(t, want, got)
	assert.Equal(t, want[4:], p.StderrTail())

	require.NoError(t, p.Stop(t.Context()))
	assert.Equal(t, []string{"test/ready"}, rec.methods(), "stderr never reaches the handler")
	assert.Empty(t, logs.atLeast(slog.LevelWarn), "no junk on stdout")
}

func TestStderrFileAppends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := filepath.Join(dir, "old.log")
	require.NoError(t, os.WriteFile(old, []byte("from before\n"), 0o644))
	fresh := filepath.Join(dir, "fresh.log")

	for _, path := range []string{old, fresh} {
		cfg := fakeConfig(t, "stderr-lines", "2")
		cfg.Stderr, cfg.StderrPath = upstream.StderrFile, path
		p, rec, _ := start(t, cfg)
		rec.waitReady(t)
		require.NoError(t, p.Stop(t.Context()))
		assert.Nil(t, p.StderrTail(), "no tail outside log mode")
	}
	b, err := os.ReadFile(old)
	require.NoError(t, err)
	assert.Equal(t, "from before\nline 1\nline 2\n", string(b))
	b, err = os.ReadFile(fresh)
	require.NoError(t, err)
	assert.Equal(t, "line 1\nline 2\n", string(b))
	fi, err := os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// lockedBuffer is a writer safe to read while the stderr copier writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestStderrInheritAndDiscard(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	cfg := fakeConfig(t, "stderr-lines", "3")
	cfg.Stderr, cfg.StderrInherit = upstream.StderrInherit, &buf
	p, rec, logs := start(t, cfg)
	rec.waitReady(t)
	require.NoError(t, p.Stop(t.Context()))
	assert.Equal(t, "line 1\nline 2\nline 3\n", buf.String())
	assert.Nil(t, p.StderrTail())
	assert.Empty(t, logs.records("server stderr"))

	cfg.Stderr, cfg.StderrInherit = upstream.StderrDiscard, nil
	p, rec, logs = start(t, cfg)
	rec.waitReady(t)
	require.NoError(t, p.Stop(t.Context()))
	assert.Nil(t, p.StderrTail())
	assert.Empty(t, logs.records("server stderr"))
	assert.Equal(t, upstream.Exit{Code: 0, Reason: upstream.ReasonStopped}, p.Exit())
}

// Stop closes stdin, then sends SIGTERM after StdinGrace, then SIGKILL after
// TermGrace; each kind of server ends at its step.
func TestStopEscalation(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	tests := []struct {
		mode       string
		stdinGrace time.Duration
		termGrace  time.Duration
		want       upstream.Exit
		min, max   time.Duration
	}{
		{"echo", patience, patience, upstream.Exit{Code: 0, Reason: upstream.ReasonStopped}, 0, patience / 2},
		{"ignore-eof", grace, patience, upstream.Exit{Code: -1, Signal: "terminated", Reason: upstream.ReasonStopped}, grace, patience / 2},
		{"ignore-term", grace, grace, upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonStopped}, 2 * grace, patience / 2},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			eachMode(t, func(t *testing.T, reaper []string) {
				cfg := fakeConfig(t, tt.mode, "")
				cfg.StdinGrace, cfg.TermGrace = tt.stdinGrace, tt.termGrace
				cfg.Reaper = reaper
				p, rec, _ := start(t, cfg)
				rec.waitReady(t) // the child has set up its signal handling

				begin := time.Now()
				require.NoError(t, p.Stop(t.Context()))
				took := time.Since(begin)

				assert.Equal(t, tt.want, p.Exit(), "the server's status, not the reaper's")
				assert.GreaterOrEqual(t, took, tt.min)
				assert.Less(t, took, tt.max)
			})
		})
	}
}

// A ctx that ends during the escalation skips to SIGKILL.
func TestStopContextSkipsToKill(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, reaper []string) {
		cfg := fakeConfig(t, "ignore-term", "")
		cfg.Reaper = reaper
		p, rec, _ := start(t, cfg)
		rec.waitReady(t)

		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		begin := time.Now()
		err := p.Stop(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(begin), patience/2)
		assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonStopped}, p.Exit())
	})
}

func TestStopConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "ignore-eof", "")
	cfg.StdinGrace = 200 * time.Millisecond
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)

	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range cap(errs) {
		wg.Go(func() { errs <- p.Stop(t.Context()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.NoError(t, p.Stop(t.Context()), "again after Done")
	p.Kill("late")
	assert.Equal(t, upstream.Exit{Code: -1, Signal: "terminated", Reason: upstream.ReasonStopped}, p.Exit())
}

func TestExitOnItsOwn(t *testing.T) {
	t.Parallel()
	eachMode(t, testExitOnItsOwn)
}

func testExitOnItsOwn(t *testing.T, reaper []string) {
	cfg := fakeConfig(t, "exit-3", "")
	cfg.Reaper = reaper
	p, _, logs := start(t, cfg)
	waitDone(t, p)
	want := upstream.Exit{Code: 3, Reason: upstream.ReasonExited}
	assert.Equal(t, want, p.Exit())
	assert.Equal(t, "exit status 3", p.Exit().String())

	assert.ErrorIs(t, p.Send(request(1, "ping")), upstream.ErrClosed)
	assert.ErrorIs(t, p.WaitWritable(t.Context()), upstream.ErrClosed)
	assert.NoError(t, p.Stop(t.Context()), "Stop after the process exited by itself")
	assert.Equal(t, want, p.Exit(), "Stop after the fact does not change the reason")
	exited := logs.records("server exited")
	require.Len(t, exited, 1)
	assert.Equal(t, "exit status 3", exited[0].Attrs["exit"])
}

func TestKill(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, reaper []string) {
		cfg := fakeConfig(t, "ignore-term", "")
		cfg.Reaper = reaper
		p, rec, logs := start(t, cfg)
		rec.waitReady(t)
		begin := time.Now()
		p.Kill("shutdown")
		waitDone(t, p)
		assert.Less(t, time.Since(begin), time.Second, "no wait for the backstop")
		assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: "shutdown"}, p.Exit())
		assert.Equal(t, "signal: killed (shutdown)", p.Exit().String())
		assert.Empty(t, logs.atLeast(slog.LevelWarn), "the reaper acted on the request")
	})
}

// A descendant left in the group (here one that ignores SIGTERM) dies with
// the group once the leader is gone, even when the leader exited politely.
func TestStopKillsGrandchild(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, reaper []string) {
		cfg := fakeConfig(t, "grandchild", "")
		cfg.Reaper = reaper
		p, rec, _ := start(t, cfg)
		rec.waitReady(t)
		pid := grandchildPid(t, p)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		require.False(t, gone(pid), "grandchild %d runs before Stop", pid)

		require.NoError(t, p.Stop(t.Context()))
		assert.Equal(t, upstream.Exit{Code: 0, Reason: upstream.ReasonStopped}, p.Exit())
		assert.Eventually(t, func() bool { return gone(pid) }, patience, 5*time.Millisecond,
			"grandchild %d still runs after Stop", pid)
	})
}

// A descendant that left the group and holds our stdout cannot keep Done
// from closing. Without a reaper it survives (setsid took it out of the
// group); on Linux a reaper, as a subreaper, inherits it when the server
// dies and kills it.
func TestEscapedGrandchildDoesNotHoldDone(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, reaper []string) {
		cfg := fakeConfig(t, "escaped-grandchild", "")
		cfg.Reaper = reaper
		p, rec, _ := start(t, cfg)
		rec.waitReady(t)
		pid := grandchildPid(t, p)
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })

		begin := time.Now()
		require.NoError(t, p.Stop(t.Context()))
		assert.Less(t, time.Since(begin), patience/2)
		assert.Equal(t, upstream.Exit{Code: 0, Reason: upstream.ReasonStopped}, p.Exit())
		if reaper != nil && runtime.GOOS == "linux" {
			assert.True(t, gone(pid), "the subreaper sweep killed it before the reaper exited")
		} else {
			assert.False(t, gone(pid), "setsid took it out of the group (the documented limit)")
		}
	})
}

// Junk lines under the limit are logged and dropped, and a valid message in
// between resets the count.
func TestJunkBelowLimitTolerated(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "junk-banner", "2")
	cfg.MaxJunkLines = 2
	p, rec, logs := start(t, cfg)
	rec.waitReady(t)
	call(t, p, rec, 1, "ping")
	assert.Equal(t, []string{"test/between", "test/ready"}, rec.methods())

	junk := logs.records("junk on server stdout, dropped")
	require.Len(t, junk, 4)
	assert.Equal(t, slog.LevelWarn, junk[0].Level)
	assert.Equal(t, "test", junk[0].Attrs["server"])
	assert.Equal(t, "banner line 0: starting up", junk[0].Attrs["preview"])
	assert.Equal(t, []string{"1", "2", "1", "2"}, []string{
		junk[0].Attrs["in_a_row"], junk[1].Attrs["in_a_row"], junk[2].Attrs["in_a_row"], junk[3].Attrs["in_a_row"]})
	select {
	case <-p.Done():
		require.FailNow(t, "the server was ended", "%v", p.Exit())
	default:
	}
}

func TestJunkFloodKills(t *testing.T) {
	t.Parallel()
	eachMode(t, testJunkFloodKills)
}

func testJunkFloodKills(t *testing.T, reaper []string) {
	cfg := fakeConfig(t, "junk-flood", "")
	cfg.MaxJunkLines = 5
	cfg.Reaper = reaper
	p, rec, logs := start(t, cfg)
	waitDone(t, p)
	assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonJunkOutput}, p.Exit())
	assert.Empty(t, rec.methods())

	junk := logs.records("junk on server stdout, dropped")
	assert.Len(t, junk, 6, "one more than tolerated, then nothing")
	assert.Equal(t, "junk "+strings.Repeat("j", 195)+"…", junk[0].Attrs["preview"], "preview cut at 200 bytes")
}

// An answer over the limit reaches HandleTooLarge with its id, found at the
// end of the line, and the server goes on.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	eachMode(t, testTooLarge)
}

func testTooLarge(t *testing.T, reaper []string) {
	const limit, size = 1024, 4096
	cfg := fakeConfig(t, "huge", strconv.Itoa(size))
	cfg.MaxMessageBytes = limit
	cfg.Reaper = reaper
	p, rec, logs := start(t, cfg)
	rec.waitReady(t)

	require.NoError(t, p.Send(request(7, "big")))
	require.Eventually(t, func() bool { return len(rec.tooLarges()) > 0 }, patience, 5*time.Millisecond)
	assert.Equal(t, []tooLarge{{ID: "7", Size: int64(len(hugeAnswer("7", size)))}}, rec.tooLarges())

	call(t, p, rec, 8, "ping")
	warns := logs.atLeast(slog.LevelWarn)
	require.Len(t, warns, 1, "the too-large line is not junk")
	assert.Equal(t, "message from server over the size limit, skipped", warns[0].Msg)
	assert.Equal(t, "7", warns[0].Attrs["id"])

	require.NoError(t, p.Stop(t.Context()))
	assert.Equal(t, upstream.Exit{Code: 0, Reason: upstream.ReasonStopped}, p.Exit())
}

// blob is a notification of about n bytes.
func blob(n int) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"test/blob","params":{"x":"` + strings.Repeat("b", n) + `"}}`)
}

// padded is a request with a params string that makes it about size bytes.
func padded(id int, size int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":%q}}`, id, strings.Repeat("p", max(size-60, 0)))
}

// resultIDs lists the ids of the results received, in order.
func (r *recorder) resultIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, m := range r.msgs {
		if m.Kind == jsonrpc.KindResult {
			ids = append(ids, string(m.ID))
		}
	}
	return ids
}

// waitResults waits for n results and returns their ids in order.
func (r *recorder) waitResults(t *testing.T, n int, why string) []string {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.resultIDs()) >= n },
		patience, 5*time.Millisecond, "%d results: %s (have %v)", n, why, r.resultIDs())
	return r.resultIDs()
}

func idStrings(from, to int) []string {
	var ids []string
	for id := from; id <= to; id++ {
		ids = append(ids, strconv.Itoa(id))
	}
	return ids
}

// A run that SendLater takes past WriteQueueBytes must drain without a
// Flush: the sessions wait in WaitWritable for that very queue.
func TestSendLaterPastWriteQueueBytesWakesWriter(t *testing.T) {
	t.Parallel()
	const soft = 8 << 10
	cfg := fakeConfig(t, "echo", "")
	cfg.WriteQueueBytes = soft
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)

	// Three frames of 3000 bytes: the third takes the queue past the bound
	// (and stays under twice it, where SendLater would refuse).
	for id := 1; id <= 3; id++ {
		require.NoError(t, p.SendLater(padded(id, 3000)), "SendLater %d", id)
	}
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	assert.NoError(t, p.WaitWritable(ctx), "WaitWritable returns once the queue drains, with no Flush")
	assert.Equal(t, idStrings(1, 3), rec.waitResults(t, 3, "no Flush was called"))
}

// A server that takes no byte for WriteStallTimeout is killed as stalled.
func TestWriteStall(t *testing.T) {
	t.Parallel()
	eachMode(t, testWriteStall)
}

func testWriteStall(t *testing.T, reaper []string) {
	cfg := fakeConfig(t, "no-read", "")
	cfg.WriteStallTimeout = 300 * time.Millisecond
	cfg.Reaper = reaper
	p, rec, logs := start(t, cfg)
	rec.waitReady(t)

	// More than a pipe holds: the writer blocks with bytes waiting.
	begin := time.Now()
	require.NoError(t, p.Send(blob(256<<10)))
	waitDone(t, p)
	assert.GreaterOrEqual(t, time.Since(begin), cfg.WriteStallTimeout)
	assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonStalled}, p.Exit())
	assert.Equal(t, "signal: killed (stalled)", p.Exit().String())
	assert.Len(t, logs.records("server stalled: no byte of its stdin read; killing it"), 1)
	assert.ErrorIs(t, p.Send(request(1, "ping")), upstream.ErrClosed)
}

// Above WriteQueueBytes WaitWritable blocks, twice that Send refuses, and
// once the server reads again the waiters are released.
func TestWriteQueueFlowControl(t *testing.T) {
	t.Parallel()
	const soft = 256 << 10
	cfg := fakeConfig(t, "no-read", "")
	cfg.WriteQueueBytes = soft
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)

	// A frame larger than the pipe can never be written in full while the
	// server does not read, so the counts below do not depend on timing.
	frame := blob(200 << 10)
	n := len(frame) + 1
	require.NoError(t, p.Send(frame))
	assert.Equal(t, n, p.Queued())
	require.NoError(t, p.WaitWritable(t.Context()), "still under the soft bound")

	require.NoError(t, p.Send(frame))
	assert.Equal(t, 2*n, p.Queued())
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, p.WaitWritable(ctx), context.DeadlineExceeded, "over the soft bound: blocks")

	assert.ErrorIs(t, p.Send(frame), upstream.ErrQueueFull, "would pass twice the soft bound")
	assert.Equal(t, 2*n, p.Queued(), "a refused frame is not queued")

	waited := make(chan error, 1)
	go func() { waited <- p.WaitWritable(t.Context()) }()
	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGUSR1)) // start reading
	select {
	case err := <-waited:
		assert.NoError(t, err)
	case <-time.After(patience):
		require.FailNow(t, "WaitWritable not released after the queue drained")
	}
	require.Eventually(t, func() bool { return p.Queued() == 0 }, patience, 5*time.Millisecond)
	call(t, p, rec, 1, "ping")
}

// WaitWritable returns ErrClosed when the process goes while it waits, and
// Send and WaitWritable return ErrClosed after.
func TestWaitWritableClosed(t *testing.T) {
	t.Parallel()
	const soft = 256 << 10
	cfg := fakeConfig(t, "no-read", "")
	cfg.WriteQueueBytes = soft
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)
	frame := blob(200 << 10)
	require.NoError(t, p.Send(frame))
	require.NoError(t, p.Send(frame))

	waited := make(chan error, 1)
	go func() { waited <- p.WaitWritable(t.Context()) }()
	p.Kill("")
	select {
	case err := <-waited:
		assert.ErrorIs(t, err, upstream.ErrClosed)
	case <-time.After(patience):
		require.FailNow(t, "WaitWritable not released by the exit")
	}
	waitDone(t, p)
	assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonKilled}, p.Exit())
	assert.ErrorIs(t, p.Send(frame), upstream.ErrClosed)
	assert.ErrorIs(t, p.WaitWritable(t.Context()), upstream.ErrClosed)
	assert.Equal(t, 0, p.Queued())
}

// A server that closes stdout, or stdin, but lives on can no longer serve:
// after StdinGrace it is killed with a reason that says which.
func TestHalfClosedServerKilled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode   string
		reason string
	}{
		{"close-stdout", upstream.ReasonStdoutClosed},
		{"close-stdin", upstream.ReasonStdinClosed},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			eachMode(t, func(t *testing.T, reaper []string) {
				cfg := fakeConfig(t, tt.mode, "")
				cfg.StdinGrace = 200 * time.Millisecond
				cfg.Reaper = reaper
				p, rec, _ := start(t, cfg)
				rec.waitReady(t)
				if tt.mode == "close-stdin" {
					// The write fails with EPIPE; from then on Send refuses.
					require.Eventually(t, func() bool {
						return errors.Is(p.Send(request(1, "ping")), upstream.ErrClosed)
					}, patience, 5*time.Millisecond)
				}
				waitDone(t, p)
				assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: tt.reason}, p.Exit())
			})
		})
	}
}

func TestExitString(t *testing.T) {
	tests := []struct {
		exit upstream.Exit
		want string
	}{
		{upstream.Exit{Code: 0, Reason: upstream.ReasonExited}, "exit status 0"},
		{upstream.Exit{Code: 3, Reason: upstream.ReasonExited}, "exit status 3"},
		{upstream.Exit{Code: -1, Signal: "segmentation fault", Reason: upstream.ReasonExited}, "signal: segmentation fault"},
		{upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonStalled}, "signal: killed (stalled)"},
		{upstream.Exit{Code: -1, Signal: "terminated", Reason: upstream.ReasonStopped}, "signal: terminated (stopped)"},
		{upstream.Exit{Code: -1, Reason: upstream.ReasonExited, Err: errors.New("wait: no child")}, "exit status -1: wait: no child"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.exit.String(), "%#v", tt.exit)
	}
}

// A burst of small frames (coalesced into few writes) and large ones
// (written from the caller's slice) reaches the server whole and in order.
func TestBurstKeepsOrder(t *testing.T) {
	t.Parallel()
	p, rec, _ := start(t, fakeConfig(t, "echo", ""))
	assert.Equal(t, upstream.Exit{}, p.Exit(), "zero before Done")
	rec.waitReady(t)

	const n = 60
	for id := 1; id <= n; id++ {
		pad := 10
		if id%7 == 0 {
			pad = 100 << 10 // over the coalescing size
		}
		frame := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"pad":%q}}`, id, strings.Repeat("p", pad))
		require.NoError(t, p.Send(frame))
	}
	require.Eventually(t, func() bool { return rec.response(strconv.Itoa(n)) != nil }, patience, 5*time.Millisecond)
	var ids []string
	rec.mu.Lock()
	for _, m := range rec.msgs {
		if m.Kind == jsonrpc.KindResult {
			ids = append(ids, string(m.ID))
		}
	}
	rec.mu.Unlock()
	want := make([]string, n)
	for i := range want {
		want[i] = strconv.Itoa(i + 1)
	}
	assert.Equal(t, want, ids)
	assert.Equal(t, 0, p.Queued())
}

// An answer that is not valid JSON-RPC but whose id is readable reaches
// HandleInvalidAnswer, is logged (the line cut short) and is no junk: a
// server that answers with NaN is not restarted however often it does.
// A broken answer to no request in flight is junk.
func TestInvalidAnswer(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "invalid", "")
	cfg.MaxJunkLines = 1
	p, rec, logs := start(t, cfg)
	rec.mu.Lock()
	rec.inFlight = func(id string) bool { return id != "99" }
	rec.mu.Unlock()
	rec.waitReady(t)
	for i := 1; i <= 4; i++ {
		require.NoError(t, p.Send(request(i, []string{"nan", "latin1"}[i%2])))
	}
	require.Eventually(t, func() bool { return len(rec.invalids()) == 4 }, patience, 5*time.Millisecond)
	assert.Equal(t, []string{"1", "2", "3", "4"}, rec.invalids())
	call(t, p, rec, 5, "ping")
	warns := logs.records("invalid answer from the server; its request fails with invalid_answer")
	require.Len(t, warns, 4)
	assert.Equal(t, "1", warns[0].Attrs["id"])
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":{"x":NaN}}`, warns[1].Attrs["preview"])
	assert.Equal(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"text\":\"caf\uFFFD\"}}", warns[0].Attrs["preview"], "made safe to log")
	assert.Empty(t, logs.records("junk on server stdout, dropped"), "answers are no junk")

	require.NoError(t, p.Send(request(99, "nan")))
	require.Eventually(t, func() bool { return len(logs.records("junk on server stdout, dropped")) == 1 }, patience, 5*time.Millisecond,
		"a broken answer to nothing in flight is junk")
	select {
	case <-p.Done():
		require.FailNow(t, "the server was ended", "%v", p.Exit())
	default:
	}
}
