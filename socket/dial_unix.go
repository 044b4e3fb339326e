//go:build unix

package socket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// ErrForeignPeer: the process at the other end of a socket runs as another
// uid. The error that carries it names the socket, its folder and that uid.
var ErrForeignPeer = errors.New("socket: the socket is served by another user")

// Dial connects a client of the daemon to the socket at path and hands the
// connection over only once it is known to lead to a process of this uid,
// so nothing is sent to anyone else. Two checks, in order:
//
//   - the folder holding path must pass CheckDir (a private folder of ours),
//     checked before connecting;
//   - the credentials the kernel keeps for the listening end (SO_PEERCRED on
//     Linux, LOCAL_PEERCRED on macOS) must carry our uid. This holds even if
//     the folder was swapped between the check and the connect, or a socket
//     in our folder is listened on by a process that changed uid after bind.
//
// Errors: CheckDir's (ErrUnsafeDir; fs.ErrNotExist when the folder is
// missing), the dial's as net.Dialer returns them (syscall.ENOENT when no
// socket is there, syscall.ECONNREFUSED for a stale one), an error matching
// ErrForeignPeer, or one saying the peer's credentials could not be read. In
// the last two cases the connection has been closed. ctx bounds the dial.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	dir := filepath.Dir(path)
	if err := CheckDir(dir); err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err // a *net.OpError: it names the path
	}
	if err := checkPeer(c, path, os.Getuid()); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// checkPeer returns nil if the process at the other end of c, a connection
// to the socket at path, runs as uid.
func checkPeer(c net.Conn, path string, uid int) error {
	p, err := PeerOf(c)
	if err != nil {
		return fmt.Errorf("dial %s: %w", path, err)
	}
	if p.UID == uid {
		return nil
	}
	pid := ""
	if p.PID != 0 {
		pid = fmt.Sprintf(" (pid %d)", p.PID)
	}
	return refuse(ErrForeignPeer, "socket %s in %s is served by uid %d%s, not by uid %d; refusing to send it anything",
		path, filepath.Dir(path), p.UID, pid, uid)
}
