package daemon

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecords: a record is found by any name of its config file, a record
// whose process is gone is removed when read, and a daemon removes only
// its own record.
func TestRecords(t *testing.T) {
	state := t.TempDir()
	dir := t.TempDir()
	config := filepath.Join(dir, "mux.toml")
	require.NoError(t, os.WriteFile(config, nil, 0o600))
	link := filepath.Join(dir, "link.toml")
	require.NoError(t, os.Symlink(config, link))

	me := Record{Config: config, SocketDir: "/run/s", Pid: os.Getpid(), Version: "v", Started: time.Unix(1e9, 0).UTC()}
	require.NoError(t, WriteRecord(state, me))
	for _, name := range []string{config, link, filepath.Join(dir, ".", "mux.toml")} {
		got, ok := ReadRecord(state, name)
		assert.Equal(t, [2]any{true, me}, [2]any{ok, got}, "the record read as %s", name)
	}
	assert.Equal(t, []Record{me}, RecordsServing(state, "/run/s"), "records serving /run/s")
	assert.Empty(t, RecordsServing(state, "/elsewhere"), "records serving elsewhere")

	removeRecord(state, config, os.Getpid()+1)
	_, ok := ReadRecord(state, config)
	assert.True(t, ok, "another daemon's exit leaves the record")
	removeRecord(state, link, os.Getpid())
	_, ok = ReadRecord(state, config)
	assert.False(t, ok, "the daemon's own exit removes it")

	// A process that has exited: its record is stale.
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	require.NoError(t, WriteRecord(state, Record{Config: config, SocketDir: "/run/s", Pid: cmd.Process.Pid}))
	_, ok = ReadRecord(state, config)
	assert.False(t, ok, "a record whose process is gone is not returned")
	_, err := os.Stat(recordPath(state, config))
	assert.True(t, os.IsNotExist(err), "and it is removed: %v", err)

	// pruneRecords removes the stale records of other config files and
	// keeps the live ones.
	other := filepath.Join(dir, "other.toml")
	require.NoError(t, WriteRecord(state, Record{Config: other, SocketDir: "/run/t", Pid: cmd.Process.Pid}))
	require.NoError(t, WriteRecord(state, me))
	pruneRecords(state, slog.New(slog.DiscardHandler))
	_, err = os.Stat(recordPath(state, other))
	assert.True(t, os.IsNotExist(err), "the stale record is pruned: %v", err)
	_, ok = ReadRecord(state, config)
	assert.True(t, ok, "the live record stays")
}
