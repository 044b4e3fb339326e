//go:build unix

package socket

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse: a live process is serving the socket path.
var ErrInUse = errors.New("socket: address in use by a live server")

// probeTimeout bounds the dial that tells a live socket from a stale one.
const probeTimeout = 500 * time.Millisecond

// umaskMu serialises the moments when this package narrows the process-wide
// umask. It is package state because the umask is process state.
var umaskMu sync.Mutex

// Listener is a Unix socket listener whose Accept lets through only peers
// running as the same uid as this process. It implements net.Listener.
type Listener struct {
	// Logger receives a Warn for every refused peer (and, through Serve, for
	// streaks of temporary accept errors). nil discards. Set it before the
	// first Accept.
	Logger *slog.Logger

	ul   *net.UnixListener
	path string
	file fs.FileInfo // the socket file as bound, to recognise it at Close
	uid  int

	closeOnce sync.Once
	closeErr  error
}

// ListenUnix listens on path, which should lie in a folder prepared by
// PrepareDir. The socket file is created with mode 0600 and is never wider.
//
// If path already exists: when a server accepts a connection there, ListenUnix
// returns an error wrapping ErrInUse; when the connection is refused (a stale
// socket left by a process that died), the file is removed and the path taken
// over; when path is not a socket, ListenUnix refuses and leaves it alone.
//
// The probe is a real connection: a live server sees it as a client that
// closes without sending a byte.
//
// Concurrent ListenUnix calls in one folder, from this process or from other
// mcpmux processes, are serialised by an flock on the folder, so two daemons
// started together cannot both remove the same stale socket and then unlink
// each other's fresh one: the second finds the first one live.
func ListenUnix(path string) (*Listener, error) {
	if limit := len(unix.RawSockaddrUnix{}.Path); len(path) >= limit {
		return nil, fmt.Errorf("listen on %s: the path is %d bytes, the system allows at most %d; choose a shorter socket_dir",
			path, len(path), limit-1)
	}
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer unlock()

	if err := clearStale(path); err != nil {
		return nil, err
	}
	ul, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err == nil && fi.Mode().Perm() != 0o600 {
		err = fmt.Errorf("socket file has mode %#o, want 0600", fi.Mode().Perm())
		os.Remove(path)
	}
	if err != nil {
		ul.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &Listener{ul: ul, path: path, file: fi, uid: os.Getuid()}, nil
}

// lockDir takes an exclusive flock on dir and returns its release.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing the last descriptor releases the lock
}

// clearStale makes path free for bind: nothing there, or a stale socket that
// it removes. A live socket yields ErrInUse; anything else is left in place.
func clearStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("listen on %s: %w", path, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("listen on %s: the path exists and is not a socket (mode %v); refusing to replace it", path, fi.Mode())
	}

	c, err := net.DialTimeout("unix", path, probeTimeout)
	switch {
	case err == nil:
		c.Close()
		return fmt.Errorf("listen on %s: %w", path, ErrInUse)
	case errors.Is(err, syscall.EAGAIN):
		// Linux: a live listener whose backlog is full.
		return fmt.Errorf("listen on %s: %w (its backlog is full)", path, ErrInUse)
	case errors.Is(err, syscall.ENOENT):
		return nil // removed since the Lstat
	case !errors.Is(err, syscall.ECONNREFUSED):
		// Not provably stale: never remove what might be a live server.
		return fmt.Errorf("listen on %s: probe the existing socket: %w", path, err)
	}

	// Refused: nobody listens there. Remove it only if it is still the file
	// we probed.
	if now, err := os.Lstat(path); err != nil || !os.SameFile(fi, now) {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("listen on %s: remove stale socket: %w", path, err)
	}
	return nil
}

// listenPrivate creates a listening socket at path whose file has mode 0600
// from the instant it exists.
//
// Why there is no window: the mode of a socket file is fixed by bind(2) as
// 0777 minus the umask, so bind runs with the umask at 0177 and the file is
// born 0600; nothing widens it later (there is no chmod, which would leave a
// moment at the wider mode). The folder is 0700 as well, a second fence.
//
// The trade-off: the umask belongs to the whole process. During the bind
// call (microseconds), a file or folder another goroutine creates gets the
// 0177 umask too: files come out narrower, which is harmless, but a folder
// made then would lack its owner x bit. Children cannot inherit the narrowed
// umask: the window is held under syscall.ForkLock for reading, which every
// fork takes for writing. umaskMu keeps two ListenUnix calls from saving and
// restoring each other's umask. The socket is built by hand (socket, bind,
// listen) so that only the bind syscall runs inside the window and nothing
// in it takes ForkLock again.
func listenPrivate(path string) (*net.UnixListener, error) {
	fd, err := bindPrivate(path)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // FileListener works on a duplicate
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("listen: %w", err)
	}
	l, err := net.FileListener(f)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		os.Remove(path)
		return nil, fmt.Errorf("unexpected listener type %T", l)
	}
	// Close removes the file itself, and only if it is still ours.
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// bindPrivate returns a close-on-exec Unix stream socket bound to path under
// umask 0177.
func bindPrivate(path string) (int, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()

	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	unix.CloseOnExec(fd)
	old := unix.Umask(0o177)
	err = unix.Bind(fd, &unix.SockaddrUnix{Name: path})
	unix.Umask(old)
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	return fd, nil
}

// Accept waits for the next connection from a peer of this process's uid.
// Connections from other users, or whose credentials cannot be read, are
// closed at once and logged at Warn; Accept then keeps waiting. Errors are
// those of net.UnixListener.Accept (net.ErrClosed after Close).
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.ul.AcceptUnix()
		if err != nil {
			return nil, err
		}
		p, err := PeerOf(c)
		switch {
		case err != nil:
			l.logger().Warn("refused a connection whose peer is unknown", "socket", l.path, "err", err)
		case p.UID != l.uid:
			l.logger().Warn("refused a connection from another user", "socket", l.path, "uid", p.UID, "pid", p.PID)
		default:
			return c, nil
		}
		c.Close()
	}
}

// Close stops listening and removes the socket file, unless the file at the
// path is no longer the one this listener created (a newer daemon has taken
// the path over). It is idempotent: later calls return the first result.
//
// The file is checked and removed before the socket is closed, for two
// reasons. While the socket still listens no other mcpmux takes the path over
// (its probe finds it live), so the file checked is the file removed. And
// while the socket is open it holds its file's inode, so even if the file was
// unlinked behind our back the inode number cannot have been reused by a
// newer socket: comparing device and inode (os.SameFile) is exact.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		var rmErr error
		// l.file is nil for an inherited socket: its file is not ours.
		if now, err := os.Lstat(l.path); err == nil && l.file != nil && os.SameFile(l.file, now) {
			if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				rmErr = fmt.Errorf("remove %s: %w", l.path, err)
			}
		}
		l.closeErr = errors.Join(l.ul.Close(), rmErr)
	})
	return l.closeErr
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.ul.Addr() }

func (l *Listener) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}
