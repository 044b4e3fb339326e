package upstream

import (
	"syscall"
	"unsafe"
)

// sysProcAttr makes the server the leader of a new process group, so that
// signals to -pid reach the wrappers (npx, uv) and everything they start.
//
// Pdeathsig kills the server when its parent dies, but Linux ties it to the
// parent *thread* that forked, not the process: if that OS thread exits the
// server is killed early, and Go decides which thread forks. Nor does it
// reach the rest of the group. So it is a backstop only, for running without
// a reaper; the reaper (Config.Reaper) is the real answer.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// reaperSysProcAttr makes the reaper the leader of a new process group. No
// Pdeathsig: the reaper sets its own, catchable, and checks it against
// getppid, so that a thread of mcpmux that exits cannot kill it.
func reaperSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExitNoReap blocks until pid has exited, leaving it a zombie (waitid
// with WNOWAIT), so that its pid, and the group id, stay taken until Wait
// reaps it. It reports false if it could not wait.
func waitExitNoReap(pid int) bool {
	const pPID = 1     // P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return true
		case syscall.EINTR:
			continue
		}
		return false
	}
}
