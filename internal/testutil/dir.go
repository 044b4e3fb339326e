package testutil

import (
	"os"
	"testing"
)

// ShortDir returns a new, empty folder under the system's temporary folder,
// removed when the test ends. Its path is short: a Unix socket's path must
// fit sun_path (about 104 bytes on macOS), which one inside t.TempDir, named
// after the test, can exceed.
func ShortDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "mx")
	if err != nil {
		tb.Fatalf("short temporary folder: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
