package main

import (
	"os"
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
	var rec daemon.Record
	testutil.Until(t, 10*time.Second, "the record is written", func() bool {
		var ok bool
		rec, ok = daemon.ReadRecord(state, path)
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
	_, ok := daemon.ReadRecord(state, path)
	assert.False(t, ok, "the record is removed when the daemon stops")
}

// TestAlreadyServed: a serve refused because another daemon holds the
// socket folder names that daemon from its record, and says whether it
// serves the same config.
func TestAlreadyServed(t *testing.T) {
	state := t.TempDir()
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	require.NoError(t, daemon.WriteRecord(state, daemon.Record{Config: "/c/mux.toml", SocketDir: "/run/s", Pid: os.Getpid(), Started: started, Autostarted: true}))
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
