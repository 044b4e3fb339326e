package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// The errors of commands that find no daemon say so once, in plain words:
// no HTTP client or dial wrapping, a refused folder as the refusal alone,
// and auto-start named when it is off.
func TestNoDaemonErrors(t *testing.T) {
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "mux.toml")
	sock := filepath.Join(dir, "s")
	require.NoError(t, os.WriteFile(path, []byte("[daemon]\nautostart = false\n[listen]\nsocket_dir = \"s\"\n[servers.a]\ncommand = \"cat\"\n"), 0o600))

	_, err := runCLI(t.Context(), "status", "--config", path)
	assert.EqualError(t, err, "no mcpmux daemon answers on "+sock+"/.control.sock (no such file or directory): start one with `mcpmux serve`", "status, no folder yet")

	_, err = runCLI(t.Context(), "connect", "--config", path, "a")
	assert.EqualError(t, err, "no mcpmux daemon is serving "+sock+"/a.sock, and auto-start is off (autostart = false in [daemon]): start one with `mcpmux serve --config "+path+"`, or as a service (`mcpmux service install`)", "connect, autostart = false")

	require.NoError(t, os.Mkdir(sock, 0o755))
	_, err = runCLI(t.Context(), "status", "--config", path)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "socket dir "+sock+" has mode 0755"), "status, a folder open to others: the refusal alone: %v", err)
	_, err = runCLI(t.Context(), "connect", "--no-autostart", "--config", path, "a")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "socket dir "+sock+" has mode 0755"), "connect: the refusal alone: %v", err)
}
