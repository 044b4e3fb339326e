//go:build unix

package upstream

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The reaper is a small survivor that makes "no orphans" hold even when
// mcpmux itself is SIGKILLed or crashes, which a dead process cannot arrange
// by itself. mcpmux re-executes its own binary in a hidden mode (Config.Reaper)
// as the leader of a new process group; the reaper starts the server in that
// group, with the stdin, stdout and stderr it was given (no data passes
// through it), and then ends the whole group:
//
//   - when the server exits: it reports the server's status to mcpmux,
//     kills the server's descendants and then the group (itself included);
//   - when mcpmux asks (reaperKillSignal, the SIGKILL step of Process):
//     it SIGKILLs the server and goes on as above;
//   - when mcpmux dies: at once, with no report.
//
// In every case it first kills the server's container, when the server
// runs in one (see container.go). A catchable parent-death
//     signal on Linux and a kqueue NOTE_EXIT watch on macOS say so at once;
//     a getppid poll every parentPoll is the guarantee everywhere.
//
// SIGTERM, SIGINT and SIGHUP sent to the group reach the server; the reaper
// catches and ignores them (caught, not ignored, so that the server does
// not inherit SIG_IGN through exec), because it must outlive the server.
//
// On Linux the reaper is also a child subreaper: whatever the server
// orphans (a daemon that double-forked, a helper whose parent died) is
// re-parented to the reaper rather than to init. Before it kills its group
// the reaper sweeps: it kills its children, and the process group of each
// child that runs in a session of its own, round after round (each killed
// child's children are re-parented to it in turn) until it has none left.
// So on Linux even a descendant that called setsid dies with the server.
//
// The one remaining limit: a descendant that called setsid (and so left the
// group) is found only by the sweep, which needs a living reaper on Linux.
// It survives when the reaper dies without sweeping: when the reaper itself
// is SIGKILLed from outside (by the OOM killer, by someone who signals the
// group, or by Process's backstop when the reaper does not act on a kill
// request within reaperKillGrace); when the sweep runs out of sweepTime (a
// fork bomb, a process stuck in uninterruptible sleep); when the kernel
// lacks /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN); and always on
// macOS, which has no subreaper. A process that a descendant has someone
// else start (systemd-run, D-Bus activation) was never ours to kill.
//
// The reaper reports to mcpmux on fd 3, one short line per event (a pipe
// write of a short line is atomic): "pid N" once the server runs, then
// "exit CODE" or "signal NUMBER" when it ended; or "error ERRNO" in place
// of the pid when it could not be started.

const (
	// reaperKillSignal asks the reaper to SIGKILL the server and then its
	// group; Process sends it for its SIGKILL step.
	reaperKillSignal = syscall.SIGUSR2
	// parentDeathHint is the reaper's parent-death signal on Linux. It is
	// only a hint: Linux sends it when the parent *thread* that forked the
	// reaper exits, which in a Go program need not mean that mcpmux died.
	parentDeathHint = syscall.SIGUSR1
	// parentPoll is how often the reaper checks that mcpmux is still its
	// parent.
	parentPoll = 200 * time.Millisecond
	// sweepTime bounds the killing of the server's descendants before the
	// reaper kills its group (and itself).
	sweepTime = 500 * time.Millisecond
	// reportFd is where the reaper writes its reports.
	reportFd = 3
)

// Report kinds on the reaper's fd 3.
const (
	reportPid    = "pid"
	reportExit   = "exit"
	reportSignal = "signal"
	reportError  = "error"
	// reportContainer says how the container kill went, before the exit
	// report: one of the containerOutcome values.
	reportContainer = "container"
)

// RunReaper is the reaper: the mcpmux binary run as Config.Reaper plus
// these args, which Start appends: mcpmux's pid, for a server that runs
// in a container "--container ENGINE CIDFILE OWNDIR" (see container.go),
// "--", the server's executable path, its argv[0] and its arguments. It returns an exit code
// for the caller to exit with, but once the server has started it ends by
// killing its own process group, itself included, and does not return.
// It is internal to mcpmux: run by hand, it refuses. It is a process's
// main in all but name (it hands its environment to the server, and on
// Linux reads /proc), kept here because Start and it speak one protocol.
func RunReaper(args []string) int {
	parent, ctr, path, argv, err := parseReaperArgs(args)
	var st unix.Stat_t
	switch {
	case err != nil:
	case syscall.Getpgrp() != os.Getpid():
		// Start makes us the leader of a new group. Anything else is a
		// mistake, and killing our group in the end would kill strangers:
		// whoever ran us, their shell.
		err = errors.New("not the leader of its own process group")
	case unix.Fstat(reportFd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO:
		err = fmt.Errorf("no report pipe on fd %d", reportFd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpmux reaper (internal, started by mcpmux serve):", err)
		return 2
	}
	syscall.CloseOnExec(reportFd) // the server must not hold it open

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
		syscall.SIGPIPE, parentDeathHint, reaperKillSignal)
	parentGone := watchParent(parent) // after Notify: the hint must not kill us
	if syscall.Getppid() != parent {
		return 1 // mcpmux died before we could watch it; nothing started
	}

	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpmux reaper:", err)
		return 1
	}
	// The server stays in our process group (no Setpgid), so signals to
	// the group reach it; caught signals are reset to their defaults by exec.
	server, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
	})
	if err != nil {
		errno := syscall.EINVAL
		errors.As(err, &errno)
		report(reportError, int(errno))
		return 127
	}
	report(reportPid, server)
	// Let go of stdin and stdout: EOF on stdout must reach mcpmux as soon
	// as the server and its children close it, and EPIPE on stdin as soon
	// as the server closes it. stderr stays, for our own last words.
	_ = dupOnto(int(null.Fd()), 0)
	_ = dupOnto(int(null.Fd()), 1)
	null.Close()

	r := &reaper{parent: parent, server: server, ctr: ctr}
	return r.loop(sigs, parentGone)
}

func parseReaperArgs(args []string) (parent int, ctr *container, path string, argv []string, err error) {
	const usage = "usage: PARENT_PID [--container ENGINE CIDFILE OWNDIR] -- PATH ARGV0 [ARGS...]; got %q"
	if len(args) < 1 {
		return 0, nil, "", nil, fmt.Errorf(usage, args)
	}
	parent, err = strconv.Atoi(args[0])
	if err != nil || parent <= 1 {
		return 0, nil, "", nil, fmt.Errorf("bad parent pid %q", args[0])
	}
	rest := args[1:]
	if len(rest) >= 4 && rest[0] == "--container" {
		ctr = &container{engine: rest[1], cidfile: rest[2], ownDir: rest[3], env: os.Environ()}
		rest = rest[4:]
	}
	if len(rest) < 3 || rest[0] != "--" {
		return 0, nil, "", nil, fmt.Errorf(usage, args)
	}
	return parent, ctr, rest[1], rest[2:], nil
}

// reaper is the state of the reaper's one goroutine: it alone reaps, so it
// knows whether the server's pid is still ours to signal.
type reaper struct {
	parent int // mcpmux's pid
	server int
	ctr    *container         // the container the server runs in, if it does
	reaped bool               // the server has been reaped: its pid is no longer ours
	status syscall.WaitStatus // the server's, once reaped
}

func (r *reaper) loop(sigs <-chan os.Signal, parentGone <-chan struct{}) int {
	tick := time.NewTicker(parentPoll)
	defer tick.Stop()
	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGCHLD:
				if r.reap() {
					return r.serverEnded()
				}
			case parentDeathHint:
				if r.orphaned() {
					return r.abandon()
				}
			case reaperKillSignal:
				r.killServer() // its exit follows, with SIGCHLD
			}
			// SIGTERM, SIGINT, SIGHUP, SIGPIPE: the server's business.
		case <-parentGone:
			return r.abandon()
		case <-tick.C:
			if r.orphaned() {
				return r.abandon()
			}
			if r.reap() { // in case a SIGCHLD was coalesced away
				return r.serverEnded()
			}
		}
	}
}

// orphaned reports whether mcpmux has died: we have been re-parented.
func (r *reaper) orphaned() bool { return syscall.Getppid() != r.parent }

// reap reaps every child that has exited (the server, and on Linux the
// orphans re-parented to us); it reports whether the server is among them.
func (r *reaper) reap() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return r.reaped
		}
		if pid == r.server {
			r.reaped, r.status = true, ws
		}
	}
}

func (r *reaper) killServer() {
	if !r.reaped {
		_ = syscall.Kill(r.server, syscall.SIGKILL)
	}
}

// serverEnded reports the server's status to mcpmux, then kills everything
// the server left behind, and the group.
func (r *reaper) serverEnded() int {
	r.killContainer(true)
	code := 1
	switch {
	case r.status.Exited():
		code = r.status.ExitStatus()
		report(reportExit, code)
	case r.status.Signaled():
		code = 128 + int(r.status.Signal())
		report(reportSignal, int(r.status.Signal()))
	}
	r.end()
	return code
}

// abandon: mcpmux is gone, so nobody wants a report; kill everything,
// the server's container first (mcpmux kills it itself otherwise, once the
// server has exited).
func (r *reaper) abandon() int {
	r.killContainer(false)
	if r.ctr != nil {
		r.ctr.cleanup() // nobody else will
	}
	r.killServer()
	r.end()
	return 1
}

// killContainer kills the server's container, if it runs in one, and
// reports how that went when mcpmux is there to hear it. The reaper does
// it rather than mcpmux, so that it is done even when mcpmux dies at the
// moment the server does; and before the report of the server's exit, so
// that mcpmux says the server is gone only once its container is.
func (r *reaper) killContainer(tell bool) {
	if r.ctr == nil {
		return
	}
	id, gone, err := r.ctr.kill()
	outcome := outcomeOf(id, gone, err)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mcpmux reaper: could not kill the server's container %s: %v\n", id, err)
	}
	if tell {
		report(reportContainer, int(outcome))
	}
}

// end kills the server's descendants (Linux), then the whole group, which
// includes the reaper itself: it does not return in practice.
func (r *reaper) end() {
	sweep(time.Now().Add(sweepTime))
	_ = syscall.Kill(0, syscall.SIGKILL)
}

// report writes one line on fd 3. Short pipe writes are atomic; errors
// (mcpmux is gone) are of no use to anyone.
func report(kind string, n int) {
	b := []byte(kind + " " + strconv.Itoa(n) + "\n")
	for {
		if _, err := syscall.Write(reportFd, b); err != syscall.EINTR {
			return
		}
	}
}
