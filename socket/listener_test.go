//go:build unix

package socket_test

import (
	"bufio"
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// preparedDir returns a folder made by PrepareDir.
func preparedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testutil.ShortDir(t), "s")
	require.NoError(t, socket.PrepareDir(dir))
	return dir
}

// listen calls ListenUnix and closes the listener when the test ends, after
// the cleanups registered later (such as serveEcho's) have run.
func listen(t *testing.T, path string) *socket.Listener {
	t.Helper()
	l, err := socket.ListenUnix(path)
	require.NoError(t, err, "ListenUnix(%s)", path)
	t.Cleanup(func() { l.Close() })
	return l
}

// serveEcho serves l with a handler that echoes lines, until the test ends.
func serveEcho(t *testing.T, l net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		err := socket.Serve(ctx, l, echo)
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func echo(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		if _, err := c.Write(line); err != nil {
			return
		}
	}
}

func TestListenUnixCreatesPrivateSocket(t *testing.T) {
	// Even a process umask that would allow everything must not widen the socket.
	old := setUmask(0)
	defer setUmask(old)

	dir := preparedDir(t)
	path := filepath.Join(dir, "a.sock")
	l := listen(t, path)

	assert.Equal(t, 0, setUmask(0), "umask restored after ListenUnix")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.ModeSocket|0o600, fi.Mode(), "socket mode")
	di, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDir|0o700, di.Mode(), "dir mode")
	assert.Equal(t, &net.UnixAddr{Name: path, Net: "unix"}, l.Addr())

	serveEcho(t, l)
	assert.Equal(t, "hi\n", exchangeLine(t, path, "hi\n"))
}

func TestListenUnixRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(preparedDir(t), "a.sock")
	first := listen(t, path)
	serveEcho(t, first)

	second, err := socket.ListenUnix(path)
	require.ErrorIs(t, err, socket.ErrInUse)
	assert.Nil(t, second)
	assert.Contains(t, err.Error(), path)

	assert.Equal(t, "still here\n", exchangeLine(t, path, "still here\n"), "the first listener keeps serving")
}

func TestListenUnixTakesOverStaleSocket(t *testing.T) {
	tests := []struct {
		name       string
		leaveStale func(t *testing.T, path string)
	}{
		{"listener closed without unlink", func(t *testing.T, path string) {
			ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			require.NoError(t, err)
			ul.SetUnlinkOnClose(false)
			require.NoError(t, ul.Close())
		}},
		{"bound but never listening", func(t *testing.T, path string) {
			fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			require.NoError(t, err)
			defer syscall.Close(fd)
			require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(preparedDir(t), "a.sock")
			tt.leaveStale(t, path)
			_, err := os.Lstat(path)
			require.NoError(t, err, "stale socket in place")

			l := listen(t, path)
			fi, err := os.Lstat(path)
			require.NoError(t, err)
			assert.Equal(t, fs.ModeSocket|0o600, fi.Mode())
			// Only a fresh listener can answer: the stale socket refuses.
			serveEcho(t, l)
			assert.Equal(t, "new\n", exchangeLine(t, path, "new\n"))
		})
	}
}

func TestListenUnixRefusesNonSocket(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"regular file", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte("precious"), 0o600))
		}},
		{"directory", func(t *testing.T, path string) {
			require.NoError(t, os.Mkdir(path, 0o700))
		}},
		{"symlink", func(t *testing.T, path string) {
			require.NoError(t, os.Symlink("elsewhere", path))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(preparedDir(t), "a.sock")
			tt.make(t, path)
			before, err := os.Lstat(path)
			require.NoError(t, err)

			l, err := socket.ListenUnix(path)
			require.Error(t, err)
			assert.Nil(t, l)
			assert.NotErrorIs(t, err, socket.ErrInUse)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "not a socket")

			after, err := os.Lstat(path)
			require.NoError(t, err, "the file is still there")
			assert.True(t, os.SameFile(before, after), "the same file")
		})
	}
	t.Run("regular file contents", func(t *testing.T) {
		path := filepath.Join(preparedDir(t), "a.sock")
		require.NoError(t, os.WriteFile(path, []byte("precious"), 0o600))
		_, err := socket.ListenUnix(path)
		require.Error(t, err)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "precious", string(got))
	})
}

func TestListenerCloseRemovesItsFile(t *testing.T) {
	path := filepath.Join(preparedDir(t), "a.sock")
	l, err := socket.ListenUnix(path)
	require.NoError(t, err)

	require.NoError(t, l.Close())
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "socket file removed")
	assert.NoError(t, l.Close(), "second Close")

	_, err = l.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "Accept after Close")
}

func TestListenerCloseKeepsReplacedFile(t *testing.T) {
	path := filepath.Join(preparedDir(t), "a.sock")
	old := listen(t, path)

	// The file disappears under the old daemon and a newer one takes the path.
	require.NoError(t, os.Remove(path))
	newer := listen(t, path)

	require.NoError(t, old.Close())
	_, err := os.Lstat(path)
	require.NoError(t, err, "the newer socket file is still there")
	serveEcho(t, newer)
	assert.Equal(t, "newer\n", exchangeLine(t, path, "newer\n"))
}

func TestListenUnixConcurrentCallsOneWinner(t *testing.T) {
	path := filepath.Join(preparedDir(t), "a.sock")
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []*socket.Listener
		errs []error
	)
	for range n {
		wg.Go(func() {
			l, err := socket.ListenUnix(path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			won = append(won, l)
		})
	}
	wg.Wait()
	for _, l := range won {
		t.Cleanup(func() { l.Close() })
	}
	require.Len(t, won, 1, "exactly one listener, errors: %v", errs)
	for _, err := range errs {
		assert.ErrorIs(t, err, socket.ErrInUse)
	}
	serveEcho(t, won[0])
	assert.Equal(t, "one\n", exchangeLine(t, path, "one\n"))
}

func TestListenUnixRefusesOverlongPath(t *testing.T) {
	path := filepath.Join(preparedDir(t), strings.Repeat("x", 120)+".sock")
	l, err := socket.ListenUnix(path)
	require.Error(t, err)
	assert.Nil(t, l)
	assert.Contains(t, err.Error(), "shorter socket_dir")
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
