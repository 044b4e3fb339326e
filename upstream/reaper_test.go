//go:build unix

package upstream_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/upstream"
)

// Pid is the server's pid in both modes: under a reaper the server's
// parent is the reaper, which is neither the server nor us.
func TestPidIsTheServers(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, reaper []string) {
		cfg := fakeConfig(t, "pid", "")
		cfg.Reaper = reaper
		p, rec, logs := start(t, cfg)

		m := call(t, p, rec, 1, "pid")
		var got pidResult
		require.NoError(t, json.Unmarshal(m.Result, &got))
		assert.Equal(t, got.Pid, p.Pid(), "Pid() is what the server calls os.Getpid()")
		started := logs.records("server started")
		require.Len(t, started, 1)
		if reaper == nil {
			assert.Equal(t, os.Getpid(), got.Ppid)
			assert.NotContains(t, started[0].Attrs, "reaper")
			return
		}
		assert.NotEqual(t, os.Getpid(), got.Ppid, "the reaper runs the server")
		assert.NotEqual(t, got.Pid, got.Ppid)
		assert.Equal(t, strconv.Itoa(got.Ppid), started[0].Attrs["reaper"])
		pgid, err := syscall.Getpgid(got.Pid)
		require.NoError(t, err)
		assert.Equal(t, got.Ppid, pgid, "the server is in the reaper's group")
	})
}

// A server the reaper cannot exec fails Start with the error a direct
// start gives.
func TestReaperExecErrorLikeDirect(t *testing.T) {
	t.Parallel()
	notExec := filepath.Join(t.TempDir(), "server")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	var errs []string
	for _, reaper := range [][]string{nil, reaperArgv(t)} {
		cfg := fakeConfig(t, "echo", "")
		cfg.Command, cfg.Reaper = notExec, reaper
		p, err := upstream.Start(cfg, new(recorder))
		require.Error(t, err, "reaper %v", reaper)
		assert.Nil(t, p)
		assert.ErrorIs(t, err, os.ErrPermission)
		errs = append(errs, err.Error())
	}
	assert.Equal(t, "start test: fork/exec "+notExec+": permission denied", errs[0])
	assert.Equal(t, errs[0], errs[1])
}

func TestReaperValidate(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "echo", "")
	cfg.Reaper = []string{"mcpmux", "__reaper"}
	_, err := upstream.Start(cfg, new(recorder))
	assert.EqualError(t, err, `start test: reaper "mcpmux" is not an absolute path`)
}

// Run by hand, without mcpmux's arguments, its own process group or the
// report pipe, the reaper refuses and starts nothing. (A reaper that is not
// its group's leader would end by killing its caller's group.)
func TestReaperRefusesToRunByHand(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	notPipe, err := os.Open(exe)
	require.NoError(t, err)
	defer notPipe.Close()
	args := []string{reaperArg, strconv.Itoa(os.Getpid()), "--", "/bin/true", "true"}
	tests := []struct {
		name    string
		args    []string
		setpgid bool
		fd3     *os.File
		want    string
	}{
		{"no arguments", []string{reaperArg}, true, nil, "usage: PARENT_PID [--container ENGINE CIDFILE OWNDIR] -- PATH ARGV0"},
		{"not a group leader", args, false, nil, "not the leader of its own process group"},
		{"no fd 3", args, true, nil, "no report pipe on fd 3"},
		{"fd 3 not a pipe", args, true, notPipe, "no report pipe on fd 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(exe, tt.args...)
			cmd.Env = []string{"GORACE=atexit_sleep_ms=0"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: tt.setpgid}
			cmd.ExtraFiles = []*os.File{tt.fd3} // nil: fd 3 closed, whatever we inherited
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			assert.Equal(t, 2, ee.ExitCode())
			assert.Contains(t, string(out), "mcpmux reaper (internal, started by mcpmux serve): "+tt.want)
		})
	}
}

// family is a server's pids, as the stubborn mode prints them.
type family struct {
	server, reaper, grandchild, escaped int
}

func (f family) pids() []int { return []int{f.server, f.reaper, f.grandchild, f.escaped} }

// killAll is a test cleanup: whatever still runs after a failure goes.
func (f family) killAll() {
	for _, pid := range f.pids() {
		if pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// allGone reports whether none of pids runs.
func allGone(pids ...int) bool {
	for _, pid := range pids {
		if !gone(pid) {
			return false
		}
	}
	return true
}

// The point of the reaper: mcpmux (here a fake one, in its own process) is
// SIGKILLed, and the server, its grandchild (both ignoring SIGTERM and stdin
// EOF) and the reaper all go within 2 s; on Linux, so does a grandchild
// that called setsid.
func TestReaperKillsAllWhenDaemonIsKilled(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	daemon := exec.Command(exe)
	daemon.Env = []string{daemonEnv + "=stubborn", "GORACE=atexit_sleep_ms=0", "GOCOVERDIR=" + t.TempDir()}
	var stderr lockedBuffer
	daemon.Stderr = &stderr
	out, err := daemon.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, daemon.Start())
	t.Cleanup(func() {
		daemon.Process.Kill()
		daemon.Wait()
	})

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(patience):
		daemon.Process.Kill() // ends the reading goroutine
		<-lines
		require.FailNow(t, "the fake daemon printed no pids", "stderr: %s", stderr.String())
	}
	var f family
	_, err = fmt.Sscanf(line, "%d %d %d %d", &f.server, &f.reaper, &f.grandchild, &f.escaped)
	require.NoError(t, err, "line %q, stderr: %s", line, stderr.String())
	t.Cleanup(f.killAll)
	for _, pid := range f.pids() {
		require.False(t, gone(pid), "%d runs before the daemon is killed (%+v)", pid, f)
	}
	pgid, err := syscall.Getpgid(f.server)
	require.NoError(t, err)
	require.Equal(t, f.reaper, pgid, "the reaper leads the server's group")

	begin := time.Now()
	require.NoError(t, daemon.Process.Kill())
	_ = daemon.Wait()

	want := f.pids()
	if runtime.GOOS != "linux" {
		want = want[:3] // no subreaper: setsid is the documented limit
	}
	var took time.Duration
	require.Eventually(t, func() bool {
		took = time.Since(begin)
		return allGone(want...)
	}, 2*time.Second, time.Millisecond, "still running 2s after the daemon's SIGKILL: %v of %+v",
		slices.DeleteFunc(slices.Clone(want), gone), f)
	t.Logf("SIGKILL of the fake daemon to all of %+v gone: %v", f, took)
}

// A clean Stop under a reaper, with a server that ignores stdin EOF and
// SIGTERM: by the time Stop returns the server and its grandchildren are
// gone (the reaper killed them before it died) and the reaper is reaped;
// none of them is left as a zombie child of ours.
func TestReaperStopLeavesNothing(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "stubborn", "")
	cfg.StdinGrace, cfg.TermGrace = 100*time.Millisecond, 100*time.Millisecond
	cfg.Reaper = reaperArgv(t)
	p, rec, logs := start(t, cfg)
	rec.waitReady(t)
	pids := stderrPids(t, p, "grandchild", "escaped", "parent")
	f := family{server: p.Pid(), reaper: pids["parent"], grandchild: pids["grandchild"], escaped: pids["escaped"]}
	t.Cleanup(f.killAll)
	for _, pid := range f.pids() {
		require.False(t, gone(pid), "%d runs before Stop (%+v)", pid, f)
	}

	begin := time.Now()
	require.NoError(t, p.Stop(t.Context()))
	t.Logf("Stop took %v", time.Since(begin))
	assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonStopped}, p.Exit())
	assert.Empty(t, logs.records("reaper did not act on a kill request; killing its group"))

	want := f.pids()
	if runtime.GOOS != "linux" {
		want = want[:3]
	}
	// Already gone, or within a moment: an orphan's last breath.
	assert.Eventually(t, func() bool { return allGone(want...) }, time.Second, time.Millisecond,
		"still running after Stop: %v of %+v", slices.DeleteFunc(slices.Clone(want), gone), f)
	assert.ErrorIs(t, syscall.Kill(f.reaper, 0), syscall.ESRCH, "the reaper is reaped, not a zombie")
	if kids, err := ourChildren(); err == nil {
		for _, pid := range f.pids() {
			assert.NotContains(t, kids, pid, "a child of ours, zombie or not")
		}
	}
}

// ourChildren lists this process's children, zombies included (Linux).
func ourChildren() ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread has exited
		} else if err != nil {
			return nil, err
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			out = append(out, pid)
		}
	}
	return out, nil
}

// The signals the group gets, and the Linux parent-death hint, do not end
// the reaper while mcpmux lives: the server goes on serving.
func TestReaperIgnoresStraySignals(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "echo", "")
	cfg.Reaper = reaperArgv(t)
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)
	reaper, err := syscall.Getpgid(p.Pid())
	require.NoError(t, err)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGUSR1} {
		require.NoError(t, syscall.Kill(reaper, sig), "%v", sig)
	}
	assert.Never(t, func() bool {
		select {
		case <-p.Done():
			return true
		default:
			return false
		}
	}, 300*time.Millisecond, 10*time.Millisecond, "the process ended: %v", p.Exit())
	call(t, p, rec, 1, "ping")
}

// A reaper that does not act on a kill request (here: stopped) is killed
// with its whole group after reaperKillGrace.
func TestReaperKillBackstop(t *testing.T) {
	t.Parallel()
	cfg := fakeConfig(t, "grandchild", "")
	cfg.Reaper = reaperArgv(t)
	p, rec, logs := start(t, cfg)
	rec.waitReady(t)
	grandchild := grandchildPid(t, p)
	t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })
	reaper, err := syscall.Getpgid(p.Pid())
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(reaper, syscall.SIGSTOP))

	begin := time.Now()
	p.Kill("")
	waitDone(t, p)
	assert.GreaterOrEqual(t, time.Since(begin), time.Second)
	assert.Equal(t, upstream.Exit{Code: -1, Signal: "killed", Reason: upstream.ReasonKilled}, p.Exit(), "the reaper's own status")
	assert.Len(t, logs.records("reaper did not act on a kill request; killing its group"), 1)
	assert.Eventually(t, func() bool { return allGone(p.Pid(), grandchild, reaper) },
		patience, time.Millisecond, "SIGKILLed with the group")
}
