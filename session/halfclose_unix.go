//go:build unix

package session

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// peerGone reports whether the peer of a socket that read EOF has closed
// it altogether (POLLHUP: both directions shut), rather than shut down its
// writing side alone, after which it may still read.
func peerGone(raw syscall.RawConn) bool {
	gone := false
	raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		for {
			_, err := unix.Poll(fds, 0)
			if err != unix.EINTR {
				gone = err == nil && fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
				return
			}
		}
	})
	return gone
}
