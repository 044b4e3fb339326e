package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/statefile"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/upstream"
)

// TestRecordRefused: a daemon record that is a symlink, another user's or
// 400 MB is not read (the 400 MB one not even in part), and the daemon's
// prune removes it and logs why.
func TestRecordRefused(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want error
		log  string
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "theirs.json")
			require.NoError(t, os.WriteFile(target, []byte(`{"config":"/c","socket_dir":"/s","pid":1}`), 0o600))
			require.NoError(t, os.Symlink(target, path))
		}, statefile.ErrUnsafe, "is a symlink"},
		{"another uid's", func(t *testing.T, path string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give a record to another uid (65534); run the tests as root to cover it")
			}
			require.NoError(t, os.WriteFile(path, []byte(`{"config":"/c","socket_dir":"/s","pid":1}`), 0o600))
			require.NoError(t, os.Chown(path, 65534, 65534))
		}, statefile.ErrUnsafe, "owned by uid 65534"},
		{"400 MB", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(`{"config":"/c","socket_dir":"/s","pid":1}`), 0o600))
			require.NoError(t, os.Truncate(path, 400<<20))
		}, statefile.ErrTooLarge, "419430400 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := t.TempDir()
			path := recordPath(state, "/c")
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
			tt.make(t, path)

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := readRecordFile(path)
			runtime.ReadMemStats(&after)
			assert.ErrorIs(t, err, tt.want)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "read with a bound")
			_, ok := ReadRecord(state, "/c")
			assert.False(t, ok, "not a record")

			var log testutil.Buffer
			pruneRecords(state, slog.New(slog.NewTextHandler(&log, nil)))
			assert.Contains(t, log.String(), "removed a daemon record that is refused")
			assert.Contains(t, log.String(), tt.log)
			_, err = os.Lstat(path)
			assert.True(t, os.IsNotExist(err), "removed: %v", err)
		})
	}
}

// TestWriteRecordNoPredictableTemp: a link planted where the record's
// temporary file used to be named (RECORD.PID.tmp) is neither followed nor
// left to matter: the record is written through an exclusive temporary
// file, and the planted link's target is untouched.
func TestWriteRecordNoPredictableTemp(t *testing.T) {
	state := t.TempDir()
	path := recordPath(state, "/c")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
	require.NoError(t, os.Symlink(victim, path+"."+strconv.Itoa(os.Getpid())+".tmp"))
	require.NoError(t, os.Symlink(victim, path))

	require.NoError(t, WriteRecord(state, Record{Config: "/c", SocketDir: "/s", Pid: os.Getpid()}))
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))
	r, err := readRecordFile(path)
	require.NoError(t, err, "the record replaced the link")
	assert.Equal(t, "/s", r.SocketDir)
}

// TestMemoryRefused: a server's description that is 400 MB, or a link, is
// done without, and the log says so; the list of asks is neither read nor
// appended to through a link.
func TestMemoryRefused(t *testing.T) {
	state := t.TempDir()
	var log testutil.Buffer
	m := serverMemory(state, mux.Config{Upstream: upstream.Config{Command: "/bin/server"}}, slog.New(slog.NewTextHandler(&log, nil))).(memoryDir)
	require.NoError(t, m.RememberDescription("legacy", []byte(`{"x":1}`)))
	era, res := m.Description()
	assert.Equal(t, "legacy", era)
	assert.JSONEq(t, `{"x":1}`, string(res))

	require.NoError(t, os.Truncate(filepath.Join(m.dir, descriptionFile), 400<<20))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	era, res = m.Description()
	runtime.ReadMemStats(&after)
	assert.Empty(t, era)
	assert.Nil(t, res)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "read with a bound")
	assert.Contains(t, log.String(), "refused a file of what mcpmux remembers of a server, too large")
	assert.Contains(t, log.String(), "419430400 bytes")

	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
	require.NoError(t, os.Symlink(victim, filepath.Join(m.dir, sendsRequestsFile)))
	kinds, all := m.Asks()
	assert.False(t, all, "a link says nothing")
	assert.Empty(t, kinds)
	assert.Contains(t, log.String(), "not a private file of this user")
	assert.ErrorIs(t, m.RememberAsks("sampling"), statefile.ErrUnsafe, "nor is it appended to")
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))
}

// TestLogFileReplacesLink: a log path that is a link is replaced by a new
// log of ours (the link's target untouched), a folder of ours open to
// others is made private, and Repairs says both.
func TestLogFileReplacesLink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777))
	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
	path := filepath.Join(dir, "mcpmux.log")
	require.NoError(t, os.Symlink(victim, path))

	l, err := OpenLogFile(path, LogMax, LogKeep)
	require.NoError(t, err)
	_, err = l.Write([]byte("hello\n"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.Len(t, l.Repairs(), 2)
	assert.Equal(t, "state folder "+dir+" had mode 0777; set it to 0700", l.Repairs()[0])
	assert.Contains(t, l.Repairs()[1], path+" is a symlink")
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(b))
}
