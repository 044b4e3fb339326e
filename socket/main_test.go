//go:build unix

package socket_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// dialEnv, when set, turns the test binary into a client that dials the
// socket it names and reports whether the server hung up without a byte.
const dialEnv = "MCPMUX_SOCKET_TEST_DIAL"

func TestMain(m *testing.M) {
	if path := os.Getenv(dialEnv); path != "" {
		os.Exit(dialAndExpectHangup(path))
	}
	if spec := os.Getenv(squatEnv); spec != "" {
		os.Exit(runSquatter(spec))
	}
	testutil.Main(m)
}

// dialAndExpectHangup exits 0 if the server at path closes the connection
// without sending anything, 1 otherwise.
func dialAndExpectHangup(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if err != nil || n != 0 {
		fmt.Fprintf(os.Stderr, "got %d bytes, err %v; want a bare hang-up\n", n, err)
		return 1
	}
	return 0
}

// exchangeLine dials path, sends line and returns what came back up to the
// first newline.
func exchangeLine(t *testing.T, path, line string) string {
	t.Helper()
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	require.NoError(t, err, "dial %s", path)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = io.WriteString(c, line)
	require.NoError(t, err)
	got, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err, "read the echo")
	return got
}

// setUmask sets the process umask and returns the previous one. Tests in
// this package do not run in parallel, so the process-wide change is safe.
func setUmask(mask int) int { return syscall.Umask(mask) }
