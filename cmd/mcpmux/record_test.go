package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
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

	me := daemonRecord{Config: config, SocketDir: "/run/s", Pid: os.Getpid(), Version: "v", Started: time.Unix(1e9, 0).UTC()}
	require.NoError(t, writeRecord(state, me))
	for _, name := range []string{config, link, filepath.Join(dir, ".", "mux.toml")} {
		got, ok := readRecord(state, name)
		assert.Equal(t, [2]any{true, me}, [2]any{ok, got}, "the record read as %s", name)
	}
	assert.Equal(t, []daemonRecord{me}, recordsServing(state, "/run/s"), "records serving /run/s")
	assert.Empty(t, recordsServing(state, "/elsewhere"), "records serving elsewhere")

	removeRecord(state, config, os.Getpid()+1)
	_, ok := readRecord(state, config)
	assert.True(t, ok, "another daemon's exit leaves the record")
	removeRecord(state, link, os.Getpid())
	_, ok = readRecord(state, config)
	assert.False(t, ok, "the daemon's own exit removes it")

	// A process that has exited: its record is stale.
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	require.NoError(t, writeRecord(state, daemonRecord{Config: config, SocketDir: "/run/s", Pid: cmd.Process.Pid}))
	_, ok = readRecord(state, config)
	assert.False(t, ok, "a record whose process is gone is not returned")
	_, err := os.Stat(recordPath(state, config))
	assert.True(t, os.IsNotExist(err), "and it is removed: %v", err)

	// pruneRecords removes the stale records of other config files and
	// keeps the live ones.
	other := filepath.Join(dir, "other.toml")
	require.NoError(t, writeRecord(state, daemonRecord{Config: other, SocketDir: "/run/t", Pid: cmd.Process.Pid}))
	require.NoError(t, writeRecord(state, me))
	pruneRecords(state)
	_, err = os.Stat(recordPath(state, other))
	assert.True(t, os.IsNotExist(err), "the stale record is pruned: %v", err)
	_, ok = readRecord(state, config)
	assert.True(t, ok, "the live record stays")
}

// TestServeRecords: serve writes its record once it serves and removes it
// when it stops.
func TestServeRecords(t *testing.T) {
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "mux.toml")
	require.NoError(t, os.WriteFile(path, []byte("[listen]\nsocket_dir = \"s\"\n"), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	state := t.TempDir()

	served, _, cancel := serveInBackground(t, cfg, daemonEnv{state: state, autostarted: true})
	defer cancel()
	var rec daemonRecord
	testutil.Until(t, 10*time.Second, "the record is written", func() bool {
		var ok bool
		rec, ok = readRecord(state, path)
		return ok
	})
	assert.Equal(t, [4]any{path, filepath.Join(dir, "s"), os.Getpid(), true}, [4]any{rec.Config, rec.SocketDir, rec.Pid, rec.Autostarted})
	_, err = os.Stat(filepath.Join(rec.SocketDir, ".control.sock"))
	assert.NoError(t, err, "the record is written once the daemon listens")

	cancel()
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	_, ok := readRecord(state, path)
	assert.False(t, ok, "the record is removed when the daemon stops")
}

// TestAlreadyServed: a serve refused because another daemon holds the
// socket folder names that daemon from its record, and says whether it
// serves the same config.
func TestAlreadyServed(t *testing.T) {
	state := t.TempDir()
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	require.NoError(t, writeRecord(state, daemonRecord{Config: "/c/mux.toml", SocketDir: "/run/s", Pid: os.Getpid(), Started: started, Autostarted: true}))
	inUse := &daemon.InUseError{Path: "/run/s"}
	tests := []struct {
		config, dir, want string
	}{
		{"/c/mux.toml", "/run/s", "another mcpmux is already serving /run/s (pid " + strconv.Itoa(os.Getpid()) +
			", auto-started by `mcpmux connect` at 2026-01-02 03:04:05, config /c/mux.toml): it serves this config already; " +
			"`mcpmux status` shows it, or stop it (kill " + strconv.Itoa(os.Getpid()) + ") to run serve yourself"},
		{"/other/mux.toml", "/run/s", "another mcpmux is already serving /run/s (pid " + strconv.Itoa(os.Getpid()) +
			", auto-started by `mcpmux connect` at 2026-01-02 03:04:05, config /c/mux.toml): it serves another config; " +
			"stop it (kill " + strconv.Itoa(os.Getpid()) + "), or give this config another socket_dir"},
		{"/c/mux.toml", "/run/t", "another mcpmux is already serving /run/s"}, // no record serves there
	}
	for _, tt := range tests {
		cfg := &config.Config{Path: tt.config, Listen: config.Listen{SocketDir: tt.dir}}
		err := alreadyServed(inUse, cfg, daemonEnv{state: state})
		assert.EqualError(t, err, tt.want, "config %s in %s", tt.config, tt.dir)
		assert.ErrorIs(t, err, socket.ErrInUse)
	}
}
