package upstream

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watchParent asks Linux for parentDeathHint when mcpmux's thread that
// forked us exits (a hint the caller checks against getppid), and makes the
// reaper a child subreaper, so that what the server orphans is re-parented
// to it and sweep can find it. The parent-death signal needs no channel.
func watchParent(int) <-chan struct{} {
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentDeathHint), 0, 0, 0)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	return nil
}

// sweep kills the reaper's children until it has none or deadline passes:
// as a subreaper, those are the server's orphaned descendants, including
// any that left the process group with setsid. A child in a session of its
// own takes its process group with it (a session's members all descend from
// its leader, so that group holds only the server's descendants). Each
// killed child's own children are re-parented to us, and taken the next
// round.
func sweep(deadline time.Time) {
	sid, _ := unix.Getsid(0)
	for {
		kids := children()
		if len(kids) == 0 || !time.Now().Before(deadline) {
			return
		}
		for _, k := range kids {
			if s, err := unix.Getsid(k); err == nil && s != sid {
				if pg, err := unix.Getpgid(k); err == nil && pg > 1 {
					_ = unix.Kill(-pg, unix.SIGKILL)
				}
			}
			_ = unix.Kill(k, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond) // let them die, then reap them
		reapExited()
	}
}

// children lists the reaper's children, zombies included, from
// /proc/self/task/*/children (each thread has its own list). It is nil
// when the kernel does not offer those files.
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				out = append(out, pid)
			}
		}
	}
	return out
}

// reapExited reaps every child that has exited, without blocking.
func reapExited() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}

// dupOnto makes fd to a copy of fd from.
func dupOnto(from, to int) error { return unix.Dup3(from, to, 0) }
