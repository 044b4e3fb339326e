//go:build unix && !linux

package upstream

import "syscall"

// sysProcAttr makes the server the leader of a new process group, so that
// signals to -pid reach the wrappers (npx, uv) and everything they start.
// There is no parent-death signal here: without a reaper (Config.Reaper),
// a server outlives a SIGKILLed mcpmux.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// reaperSysProcAttr makes the reaper the leader of a new process group.
func reaperSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExitNoReap cannot wait without reaping here; the caller reaps first.
func waitExitNoReap(int) bool { return false }
