package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// 300 lines of 100 bytes into a log of at most 4000 bytes with two old
// files kept: no file passes the bound, only the two newest old files are
// left, and the lines they hold with the current one are the last ones
// written, in order, none cut.
func TestLogFileRotatesBySize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpmux.log")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", 3950)+"\n"), 0o600))
	l, err := OpenLogFile(path, 4000, 2)
	require.NoError(t, err)
	for i := range 300 {
		_, err := fmt.Fprintf(l, "line %04d %s\n", i, strings.Repeat("y", 89))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())

	var lines []string
	for _, p := range []string{path + ".2", path + ".1", path} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.LessOrEqual(t, fi.Size(), int64(4000), p)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	_, err = os.Stat(path + ".3")
	assert.True(t, os.IsNotExist(err), "no third old file")
	first := 300 - len(lines)
	require.Greater(t, first, 0, "the oldest lines are gone")
	for i, line := range lines {
		assert.True(t, strings.HasPrefix(line, fmt.Sprintf("line %04d ", first+i)), "line %d: %.20q", i, line)
		assert.Len(t, line, 99)
	}
}
