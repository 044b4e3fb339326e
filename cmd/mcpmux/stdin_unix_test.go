//go:build unix

package main

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nonblocking reports the O_NONBLOCK mode of fd's open file.
func nonblocking(t *testing.T, fd uintptr) bool {
	t.Helper()
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	require.Zero(t, errno)
	return flags&syscall.O_NONBLOCK != 0
}

// TestPollableStdin: a pipe on stdin, in blocking mode as a parent leaves
// it, is read in the poller while connect runs, and is put back in
// blocking mode after; a file is left as it is.
func TestPollableStdin(t *testing.T) {
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	r := os.NewFile(uintptr(fds[0]), "stdin")
	w := os.NewFile(uintptr(fds[1]), "client")
	defer r.Close()
	require.False(t, nonblocking(t, r.Fd()))

	got, restore := pollableStdin(r)
	require.NotSame(t, r, got)
	assert.True(t, nonblocking(t, r.Fd()), "the pipe is read in the poller")
	go func() { // the client: one line, then its end
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"))
		w.Close()
	}()
	b, err := io.ReadAll(got)
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n", string(b))
	restore()
	assert.False(t, nonblocking(t, r.Fd()), "blocking again for whoever reads it next")

	f, err := os.Create(filepath.Join(t.TempDir(), "requests"))
	require.NoError(t, err)
	defer f.Close()
	same, restore := pollableStdin(f)
	defer restore()
	assert.Same(t, f, same, "a file is read as it is")
}
