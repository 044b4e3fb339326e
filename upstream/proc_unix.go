//go:build unix

package upstream

import (
	"os"
	"syscall"
)

// signalGroup sends sig to every process in the group that pid leads.
// ESRCH (the group is already empty) is the expected outcome of a late kill.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// signalName names the signal that ended a process, "" if it exited.
func signalName(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
