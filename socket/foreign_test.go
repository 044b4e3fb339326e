//go:build unix

package socket_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// nobody is the uid and gid the foreign client runs as.
const nobody = 65534

// TestAcceptRefusesOtherUsers has a process of another uid connect and checks
// that it is hung up on without a byte, that a Warn names its uid and pid,
// and that Accept goes on to return the next, same-uid, connection.
func TestAcceptRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to start a client as another uid; run the tests as root to cover the peer check")
	}
	// The folder and socket are opened up here, in the test only, so that the
	// foreign client gets as far as the peer check; a 0700 folder would stop
	// it at connect.
	dir := testutil.ShortDir(t)
	require.NoError(t, os.Chmod(dir, 0o711))
	exe := copyTestBinary(t, filepath.Join(dir, "client"))

	path := filepath.Join(dir, "f.sock")
	l := listen(t, path)
	rec := &socket.LogRecorder{}
	l.Logger = slog.New(rec)
	require.NoError(t, os.Chmod(path, 0o666))

	type accepted struct {
		c   net.Conn
		err error
	}
	got := make(chan accepted, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close() // before the Wait: unblocks Accept if the test fails early
	wg.Go(func() {
		c, err := l.Accept()
		got <- accepted{c, err}
	})

	cmd := exec.Command(exe)
	cmd.Env = []string{dialEnv + "=" + path}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
		t.Skipf("cannot start a process as uid %d here: %v", nobody, err)
	}
	require.NoError(t, err, "foreign client: %s", out)

	// Accept goes on: our own connection, queued after the foreign one, is
	// the one it returns.
	own, err := net.Dial("unix", path)
	require.NoError(t, err)
	defer own.Close()
	var a accepted
	select {
	case a = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return the same-uid connection")
	}
	require.NoError(t, a.err)
	defer a.c.Close()
	peer, err := socket.PeerOf(a.c)
	require.NoError(t, err)
	assert.Equal(t, os.Getuid(), peer.UID)

	want := []socket.Record{{
		Level: slog.LevelWarn,
		Msg:   "refused a connection from another user",
		Attrs: map[string]any{"socket": path, "uid": int64(nobody), "pid": int64(cmd.Process.Pid)},
	}}
	assert.Equal(t, want, rec.Records())
}

// copyTestBinary copies the running test binary to dst, readable and
// executable by everyone: go test builds it in a folder only we can enter.
func copyTestBinary(t *testing.T, dst string) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	src, err := os.Open(self)
	require.NoError(t, err)
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, src)
	require.NoError(t, errors.Join(err, out.Close()))
	return dst
}
