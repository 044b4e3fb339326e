package streamable_test

import (
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/statefile"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/streamable"
)

// storeRecord is a record the store would keep, of id.
func storeRecord(id string) []byte {
	b, _ := json.Marshal(streamable.Record{ID: id, Server: "s", Initialize: json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)})
	return b
}

// TestFileStoreRefuses: a record that is a symlink, another user's, open
// to others' writes, or 400 MB, is not restored: Load says there is none,
// the record is removed, and the log says why. The 400 MB one (sparse) is
// refused by its size, without reading it.
func TestFileStoreRefuses(t *testing.T) {
	const id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			require.NoError(t, os.WriteFile(target, storeRecord(id), 0o600))
			require.NoError(t, os.Symlink(target, path))
		}, "is a symlink"},
		{"writable by others", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, storeRecord(id), 0o600))
			require.NoError(t, os.Chmod(path, 0o666))
		}, "others may write it"},
		{"another uid's", func(t *testing.T, path string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give a record to another uid (65534); run the tests as root to cover it")
			}
			require.NoError(t, os.WriteFile(path, storeRecord(id), 0o600))
			require.NoError(t, os.Chown(path, 65534, 65534))
		}, "owned by uid 65534"},
		{"400 MB", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, storeRecord(id), 0o600))
			require.NoError(t, os.Truncate(path, 400<<20))
		}, "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "http-sessions")
			require.NoError(t, os.Mkdir(dir, 0o700))
			path := filepath.Join(dir, id+".json")
			tt.make(t, path)
			var log testutil.Buffer
			store := &streamable.FileStore{Dir: dir, Max: 8, Idle: time.Hour, Log: slog.New(slog.NewTextHandler(&log, nil))}

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := store.Load(id)
			runtime.ReadMemStats(&after)
			assert.ErrorIs(t, err, fs.ErrNotExist, "not restored")
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "read with a bound")
			assert.Contains(t, log.String(), "removed a session record that is refused")
			assert.Contains(t, log.String(), tt.want)
			_, err = os.Lstat(path)
			assert.ErrorIs(t, err, fs.ErrNotExist, "the refused record is removed")
		})
	}
}

// TestFileStorePruneRefuses: the daemon's first prune removes a record
// that is not this user's own, and says so.
func TestFileStorePruneRefuses(t *testing.T) {
	const id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	dir := filepath.Join(t.TempDir(), "http-sessions")
	require.NoError(t, os.Mkdir(dir, 0o700))
	path := filepath.Join(dir, id+".json")
	require.NoError(t, os.WriteFile(path, storeRecord(id), 0o600))
	require.NoError(t, os.Chmod(path, 0o622))
	var log testutil.Buffer
	store := &streamable.FileStore{Dir: dir, Max: 8, Idle: time.Hour, Log: slog.New(slog.NewTextHandler(&log, nil))}
	store.Prune()
	assert.NoFileExists(t, path)
	assert.Contains(t, log.String(), "removed a session record that is refused")
}

// TestFileStoreTooWideFolder: a folder of ours open to others is made
// private before a record is written in it.
func TestFileStoreTooWideFolder(t *testing.T) {
	const id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	dir := filepath.Join(t.TempDir(), "http-sessions")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777))
	store := &streamable.FileStore{Dir: dir, Max: 8, Idle: time.Hour}
	require.NoError(t, store.Save(&streamable.Record{ID: id, Server: "s", Initialize: json.RawMessage(`{}`)}))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
	_, err = statefile.Stat(filepath.Join(dir, id+".json"))
	assert.NoError(t, err, "the record is a private file of ours")
}

// TestFileStorePruneFolder: at the daemon's start, a records' folder of
// ours open to others is made private and the log says so; another
// user's folder is refused, logged, and no record is restored from it.
func TestFileStorePruneFolder(t *testing.T) {
	const id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	t.Run("ours, 0777", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "http-sessions")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chmod(dir, 0o777))
		var log testutil.Buffer
		store := &streamable.FileStore{Dir: dir, Max: 8, Idle: time.Hour, Log: slog.New(slog.NewTextHandler(&log, nil))}
		store.Prune()
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm())
		assert.Contains(t, log.String(), "state folder "+dir+" had mode 0777; set it to 0700")
	})
	t.Run("another uid's", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to give a folder to another uid (65534); run the tests as root to cover it")
		}
		dir := filepath.Join(t.TempDir(), "http-sessions")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, id+".json"), storeRecord(id), 0o600))
		require.NoError(t, os.Chown(dir, 65534, 65534))
		var log testutil.Buffer
		store := &streamable.FileStore{Dir: dir, Max: 8, Idle: time.Hour, Log: slog.New(slog.NewTextHandler(&log, nil))}
		store.Prune()
		assert.Contains(t, log.String(), "the HTTP session records' folder is refused")
		assert.Contains(t, log.String(), "owned by uid 65534")
		_, err := store.Load(id)
		assert.ErrorIs(t, err, fs.ErrNotExist, "nothing restored from their folder, even a file of ours")
	})
}
