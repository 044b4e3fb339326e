//go:build unix

package socket

import (
	"fmt"
	"net"
)

// PeerOf returns the credentials of the process at the other end of c, which
// must be a *net.UnixConn.
func PeerOf(c net.Conn) (Peer, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Peer{}, fmt.Errorf("peer credentials: %T is not a Unix socket connection", c)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var p Peer
	var credErr error
	if err := rc.Control(func(fd uintptr) { p, credErr = peerCred(int(fd)) }); err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	return p, nil
}
