//go:build unix

package socket_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

func TestDialConnectsToOurListener(t *testing.T) {
	path := filepath.Join(preparedDir(t), "a.sock")
	l := listen(t, path)

	var wg sync.WaitGroup
	defer wg.Wait()
	got := make(chan string, 1)
	wg.Go(func() {
		c, err := l.Accept()
		if err != nil {
			got <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		got <- fmt.Sprintf("%q %v", b, err)
	})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := socket.Dial(ctx, path)
	require.NoError(t, err)
	_, err = io.WriteString(c, "hello\n")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.Equal(t, `"hello\n" <nil>`, <-got, "what the listener read")
}

func TestDialReportsWhyNoDaemonAnswers(t *testing.T) {
	dir := preparedDir(t)
	stale := filepath.Join(dir, "stale.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	require.NoError(t, err)
	ul.SetUnlinkOnClose(false)
	require.NoError(t, ul.Close()) // the file stays, nobody listens: a dead daemon's socket

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		path string
		want error
	}{
		{"missing folder", t.Context(), filepath.Join(dir, "none", "a.sock"), fs.ErrNotExist},
		{"missing socket", t.Context(), filepath.Join(dir, "a.sock"), syscall.ENOENT},
		{"stale socket", t.Context(), stale, syscall.ECONNREFUSED},
		{"cancelled", cancelled, stale, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := socket.Dial(tt.ctx, tt.path)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, tt.want, "Dial(%s)", tt.path)
			assert.NotErrorIs(t, err, socket.ErrUnsafeDir)
			assert.NotErrorIs(t, err, socket.ErrForeignPeer)
		})
	}
}

// TestClientChecksRefuseSquattedFolder plays the red-team finding: another
// user creates the folder a client would use (under a sticky, world-writable
// folder like /tmp) before mcpmux does, and listens in it. CheckDir refuses
// the folder and Dial refuses it before connecting: the squatter's socket
// sees no connection at all.
func TestClientChecksRefuseSquattedFolder(t *testing.T) {
	exe := squatterExe(t)
	tests := []struct {
		mode  string
		inErr []string // besides the folder's path
	}{
		{"dir700", []string{"mode 0700", "owned by uid 65534"}},
		{"dir755", []string{"mode 0755", "owned by uid 65534"}},
		{"dir777", []string{"mode 0777", "owned by uid 65534"}},
		{"symlink", []string{"symlink owned by uid 65534"}},
		{"file", []string{"not a directory", "owned by uid 65534"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			dir := filepath.Join(stickyTmp(t), fmt.Sprintf("mcpmux-%d", os.Getuid()))
			sq := startSquatter(t, exe, tt.mode, dir)

			err := socket.CheckDir(dir)
			require.Error(t, err)
			assert.ErrorIs(t, err, socket.ErrUnsafeDir)
			for _, frag := range append([]string{dir}, tt.inErr...) {
				assert.Contains(t, err.Error(), frag)
			}

			sock := filepath.Join(dir, "s.sock")
			c, err := socket.Dial(t.Context(), sock)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, socket.ErrUnsafeDir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), sock)

			assert.Equal(t, "conns=0 bytes=0 open=0", sq.finish(t), "what reached the squatter's socket")
		})
	}
}

// TestCheckPeerRefusesListenerOfAnotherUID dials a socket another user
// listens on (root can reach it past the folder's mode) and runs Dial's peer
// check on that connection directly.
func TestCheckPeerRefusesListenerOfAnotherUID(t *testing.T) {
	exe := squatterExe(t)
	dir := filepath.Join(stickyTmp(t), "theirs")
	sq := startSquatter(t, exe, "dir700", dir)
	sock := filepath.Join(dir, "s.sock")

	c, err := net.Dial("unix", sock)
	require.NoError(t, err, "dial the foreign listener without checks")
	defer c.Close()

	err = socket.CheckPeer(c, sock, os.Getuid())
	require.Error(t, err)
	assert.ErrorIs(t, err, socket.ErrForeignPeer)
	frags := []string{"socket " + sock, "in " + dir, "served by uid 65534", fmt.Sprintf("not by uid %d", os.Getuid())}
	if runtime.GOOS == "linux" {
		frags = append(frags, fmt.Sprintf("pid %d", sq.cmd.Process.Pid))
	}
	for _, frag := range frags {
		assert.Contains(t, err.Error(), frag)
	}
	assert.NoError(t, socket.CheckPeer(c, sock, nobody), "the same connection checked for the listener's own uid")

	require.NoError(t, c.Close())
	assert.Equal(t, "conns=1 bytes=0 open=0", sq.finish(t), "what reached the foreign socket")
}

// TestDialRefusesListenerThatChangedUID covers a foreign peer inside a
// folder that passes CheckDir: a process of ours binds a socket in our
// private folder, so the file is ours, then becomes nobody and listens. Dial
// connects, sees uid nobody at the other end, and hangs up without a byte.
func TestDialRefusesListenerThatChangedUID(t *testing.T) {
	exe := squatterExe(t)
	dir := preparedDir(t)
	sock := filepath.Join(dir, "x.sock")
	sq := startSquatter(t, exe, "drop", sock)

	require.NoError(t, socket.CheckDir(dir), "the folder is ours and private")
	fi, err := os.Lstat(sock)
	require.NoError(t, err)
	require.Equal(t, fs.ModeSocket, fi.Mode().Type())
	require.Equal(t, uint32(os.Getuid()), fi.Sys().(*syscall.Stat_t).Uid, "the socket file is ours")

	c, err := socket.Dial(t.Context(), sock)
	assert.Nil(t, c)
	require.Error(t, err)
	assert.ErrorIs(t, err, socket.ErrForeignPeer)
	for _, frag := range []string{"socket " + sock, "in " + dir, "served by uid 65534"} {
		assert.Contains(t, err.Error(), frag)
	}
	assert.Equal(t, "conns=1 bytes=0 open=0", sq.finish(t), "Dial connected, sent nothing, and closed")
}

// stickyTmp returns a folder like /tmp: world-writable with the sticky bit,
// reachable by nobody.
func stickyTmp(t *testing.T) string {
	t.Helper()
	root := testutil.ShortDir(t)
	require.NoError(t, os.Chmod(root, 0o711))
	tmp := filepath.Join(root, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o700))
	require.NoError(t, os.Chmod(tmp, 0o777|fs.ModeSticky))
	return tmp
}
