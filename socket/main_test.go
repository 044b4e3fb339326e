//go:build unix

package socket_test

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// dialEnv, when set, turns the test binary into a client that dials the
// socket it names and reports whether the server hung up without a byte.
const dialEnv = "MCPMUX_SOCKET_TEST_DIAL"

func TestMain(m *testing.M) {
	if path := os.Getenv(dialEnv); path != "" {
		os.Exit(dialAndExpectHangup(path))
	}
	goleak.VerifyTestMain(m)
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

// TestPackageDoc checks that exactly one file carries the package doc and
// that it says what the package is.
func TestPackageDoc(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var docs []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.PackageClauseOnly|parser.ParseComments)
		require.NoError(t, err, "parse %s", name)
		if f.Doc != nil {
			docs = append(docs, name)
			assert.True(t, strings.HasPrefix(f.Doc.Text(), "Package socket "), "doc in %s: %q", name, f.Doc.Text())
		}
	}
	assert.Equal(t, []string{"doc.go"}, docs)
}

// shortDir returns a fresh folder with a short path: sun_path holds only
// about 104 bytes, which t.TempDir can exceed.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mx")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
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

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// setUmask sets the process umask and returns the previous one. Tests in
// this package do not run in parallel, so the process-wide change is safe.
func setUmask(mask int) int { return syscall.Umask(mask) }
