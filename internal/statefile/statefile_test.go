package statefile_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/statefile"
)

// nobody is the uid the tests that need another user's file give it to.
const nobody = 65534

// asNobody gives path to uid 65534, or skips the test when it cannot.
func asNobody(t *testing.T, path string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file to another uid (65534); run the tests as root to cover it")
	}
	require.NoError(t, os.Lchown(path, nobody, nobody))
}

func write(t *testing.T, path, text string, mode fs.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), mode))
	require.NoError(t, os.Chmod(path, mode))
}

func TestReadFileAcceptsOwnPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	write(t, path, "{}", 0o600)
	b, err := statefile.ReadFile(path, 10)
	require.NoError(t, err)
	assert.Equal(t, "{}", string(b))
}

func TestReadFileRefuses(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"symlink to a file of ours", func(t *testing.T, path string) {
			target := path + ".target"
			write(t, target, "{}", 0o600)
			require.NoError(t, os.Symlink(target, path))
		}},
		{"writable by others", func(t *testing.T, path string) { write(t, path, "{}", 0o666) }},
		{"writable by group", func(t *testing.T, path string) { write(t, path, "{}", 0o620) }},
		{"a FIFO, without blocking", func(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o600)) }},
		{"a directory", func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o700)) }},
		{"another uid's file", func(t *testing.T, path string) {
			write(t, path, "{}", 0o600)
			asNobody(t, path)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			tt.make(t, path)
			_, err := statefile.ReadFile(path, 1<<10)
			require.Error(t, err)
			assert.ErrorIs(t, err, statefile.ErrUnsafe, tt.name)
			assert.Contains(t, err.Error(), path, "the refusal names the file")
			_, err = statefile.Stat(path)
			assert.ErrorIs(t, err, statefile.ErrUnsafe, "Stat refuses it too: %s", tt.name)
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := statefile.ReadFile(filepath.Join(t.TempDir(), "none"), 10)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, statefile.ErrUnsafe)
}

// TestReadFileTooLargeUnread: a 400 MB record (sparse, so the test stays
// small on disk) is refused by its size before any of it is read: the
// read allocates next to nothing.
func TestReadFileTooLargeUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	write(t, path, "", 0o600)
	require.NoError(t, os.Truncate(path, 400<<20))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := statefile.ReadFile(path, 20<<20)
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.ErrorIs(t, err, statefile.ErrTooLarge)
	assert.Contains(t, err.Error(), "419430400 bytes")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "refused without reading it")
}

// TestReadFileBoundWhileReading: a file within the bound when checked but
// longer when read is refused after max+1 bytes (here: a file at the bound
// plus one byte).
func TestReadFileBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	write(t, path, "12345", 0o600)
	_, err := statefile.ReadFile(path, 4)
	assert.ErrorIs(t, err, statefile.ErrTooLarge)
	b, err := statefile.ReadFile(path, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(b))
}

func TestPrepareDir(t *testing.T) {
	t.Run("missing: created 0700", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "state")
		note, err := statefile.PrepareDir(dir)
		require.NoError(t, err)
		assert.Empty(t, note)
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
	})
	t.Run("ours and too wide: repaired", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chmod(dir, 0o777))
		note, err := statefile.PrepareDir(dir)
		require.NoError(t, err)
		assert.Equal(t, "state folder "+dir+" had mode 0777; set it to 0700", note)
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
	})
	t.Run("a symlink: refused, its target untouched", func(t *testing.T) {
		base := t.TempDir()
		target := filepath.Join(base, "elsewhere")
		require.NoError(t, os.Mkdir(target, 0o755))
		require.NoError(t, os.Chmod(target, 0o755))
		dir := filepath.Join(base, "state")
		require.NoError(t, os.Symlink(target, dir))
		_, err := statefile.PrepareDir(dir)
		assert.ErrorIs(t, err, statefile.ErrUnsafe)
		assert.Contains(t, err.Error(), "state folder "+dir+" is a symlink")
		fi, err := os.Stat(target)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "target's mode unchanged")
	})
	t.Run("another uid's: refused, naming it", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.Mkdir(dir, 0o777))
		require.NoError(t, os.Chmod(dir, 0o777))
		asNobody(t, dir)
		_, err := statefile.PrepareDir(dir)
		assert.ErrorIs(t, err, statefile.ErrUnsafe)
		assert.Contains(t, err.Error(), "state folder "+dir+" has mode 0777 and is owned by uid 65534")
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o777), fi.Mode().Perm(), "another user's folder is not changed")
	})
}

// TestWriteFileReplacesLink: a symlink where a file is written is replaced
// by the file; what it pointed to is untouched.
func TestWriteFileReplacesLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "victim")
	write(t, target, "precious", 0o600)
	path := filepath.Join(dir, "record.json")
	require.NoError(t, os.Symlink(target, path))

	require.NoError(t, statefile.WriteFile(path, []byte("{}")))
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b), "the link's target is untouched")
	b, err = statefile.ReadFile(path, 10)
	require.NoError(t, err, "the path is now a file of ours")
	assert.Equal(t, "{}", string(b))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 2, "no temporary file is left")
}

func TestOpenLog(t *testing.T) {
	t.Run("a symlink is replaced, its target untouched", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "victim")
		write(t, target, "precious", 0o600)
		path := filepath.Join(dir, "mcpmux.log")
		require.NoError(t, os.Symlink(target, path))

		f, note, err := statefile.OpenLog(path)
		require.NoError(t, err)
		_, err = f.WriteString("line\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		assert.Contains(t, note, "removed a log file that was refused")
		assert.Contains(t, note, path+" is a symlink")
		b, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, "precious", string(b))
		b, err = os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "line\n", string(b))
	})
	t.Run("another uid's log is replaced", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mcpmux.log")
		write(t, path, "theirs\n", 0o600)
		asNobody(t, path)
		f, note, err := statefile.OpenLog(path)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		assert.Contains(t, note, "owned by uid 65534")
		fi, err := statefile.Stat(path)
		require.NoError(t, err)
		assert.Zero(t, fi.Size(), "a new log")
	})
	t.Run("ours is appended to", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mcpmux.log")
		write(t, path, "a\n", 0o600)
		f, note, err := statefile.OpenLog(path)
		require.NoError(t, err)
		_, err = f.WriteString("b\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		assert.Empty(t, note)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "a\nb\n", string(b))
	})
}
