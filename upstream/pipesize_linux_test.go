package upstream

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A server's stdout pipe is grown to stdoutPipeSize where the system
// allows it (fs.pipe-max-size), and left as it was where it does not.
func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	before, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
	require.NoError(t, err)
	growPipe(r)
	after, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
	require.NoError(t, err)
	b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	require.NoError(t, err)
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	if limit >= stdoutPipeSize || os.Geteuid() == 0 {
		assert.Equal(t, stdoutPipeSize, after, "grown from %d", before)
	} else {
		assert.GreaterOrEqual(t, after, before)
	}
}
