package socket

import "golang.org/x/sys/unix"

// peerCred reads SO_PEERCRED: the uid and pid the peer had when it connected.
func peerCred(fd int) (Peer, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Peer{}, err
	}
	return Peer{UID: int(u.Uid), PID: int(u.Pid)}, nil
}
