package socket

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION from <sys/ucred.h>; x/sys does not export it.
const xucredVersion = 0

// peerCred reads LOCAL_PEERCRED for the effective uid (what getpeereid
// returns) and LOCAL_PEERPID for the pid, which stays 0 if the latter fails.
func peerCred(fd int) (Peer, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Peer{}, err
	}
	if x.Version != xucredVersion {
		return Peer{}, fmt.Errorf("xucred version %d, want %d", x.Version, xucredVersion)
	}
	p := Peer{UID: int(x.Uid)}
	if pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID); err == nil {
		p.PID = pid
	}
	return p, nil
}
