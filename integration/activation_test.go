package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestSocketActivation: a service manager (played by this test) makes the
// server's socket and passes it as descriptor 3 with LISTEN_PID and
// LISTEN_FDS; mcpmux serves on it rather than making its own.
func TestSocketActivation(t *testing.T) {
	cfg := writeConfig(t, demo("demo", nil), "")
	require.NoError(t, os.MkdirAll(cfg.sockets, 0o700))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.socket("demo"), Net: "unix"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	require.NoError(t, err)
	l.Close() // the child holds the socket now
	defer f.Close()
	made, err := os.Stat(cfg.socket("demo"))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// exec keeps the shell's pid, so LISTEN_PID=$$ names mcpmux.
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, bins.mcpmux, "serve", "--config", cfg.path)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=50")
	cmd.ExtraFiles = []*os.File{f}
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // owned: the deferred stop waits for it
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		assert.NoError(t, <-done, "mcpmux serve exits 0")
		if t.Failed() {
			t.Logf("daemon log:\n%s", stderr.String())
		}
	}()

	var c *client
	testutil.Eventually(t, 20*time.Second, "served on the passed socket", func() (bool, error) {
		var err error
		if c, err = dialSocket(cfg.socket("demo")); err != nil {
			return false, err
		}
		if _, err = c.initialize("2025-06-18"); err != nil {
			c.close()
			return false, err
		}
		return true, nil
	})
	defer c.close()
	assert.NoError(t, c.echo(`"hi"`, "activated"))
	now, err := os.Stat(cfg.socket("demo"))
	require.NoError(t, err)
	assert.True(t, os.SameFile(made, now), "the socket file is the one the manager made")
	assert.Contains(t, stderr.String(), "using the socket the service manager passed")
}
