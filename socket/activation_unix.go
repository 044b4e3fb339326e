//go:build unix

package socket

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// firstListenFD is the first descriptor a service manager passes (the
// sd_listen_fds protocol: systemd socket activation).
const firstListenFD = 3

// Inherited returns the listening Unix sockets that a service manager passed
// to this process, keyed by their paths, given the values of LISTEN_PID and
// LISTEN_FDS (the caller reads the environment) and this process's pid. None
// passed (or passed to another process) is an empty map. The listeners
// check their peers like ListenUnix's, and Close leaves the socket files to
// the service manager that made them.
func Inherited(listenPID, listenFDs string, pid int) (map[string]*Listener, error) {
	out := map[string]*Listener{}
	if listenPID == "" || listenFDs == "" {
		return out, nil
	}
	if p, err := strconv.Atoi(listenPID); err != nil || p != pid {
		return out, nil // meant for another process
	}
	n, err := strconv.Atoi(listenFDs)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("LISTEN_FDS=%q is not a count of descriptors", listenFDs)
	}
	for fd := firstListenFD; fd < firstListenFD+n; fd++ {
		syscall.CloseOnExec(fd) // servers we start must not inherit them
		f := os.NewFile(uintptr(fd), "listen-fd-"+strconv.Itoa(fd))
		l, err := net.FileListener(f)
		f.Close() // FileListener holds its own duplicate
		if err != nil {
			return nil, fmt.Errorf("descriptor %d from the service manager: %w", fd, err)
		}
		ul, ok := l.(*net.UnixListener)
		if !ok {
			l.Close()
			return nil, fmt.Errorf("descriptor %d from the service manager is not a Unix socket (%s)", fd, l.Addr())
		}
		ul.SetUnlinkOnClose(false)
		path := ul.Addr().String()
		out[path] = &Listener{ul: ul, path: path, uid: os.Getuid()}
	}
	return out, nil
}
