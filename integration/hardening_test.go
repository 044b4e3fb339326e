package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nobody is the uid and gid of the other user of these tests.
const nobody = 65534

// TestClientsRefuseAForeignSocketFolder: a socket folder another user made
// first (as one can under /tmp) is refused by every client of the daemon
// before it sends a byte: `connect` (which does not auto-start a daemon in
// its place) and `status` both exit non-zero with one line naming the folder
// and its owner.
func TestClientsRefuseAForeignSocketFolder(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to give the folder to another user")
	}
	cfg := writeConfig(t, demo("demo", nil), "")
	require.NoError(t, os.Mkdir(cfg.sockets, 0o700))
	require.NoError(t, os.Chown(cfg.sockets, nobody, nobody))

	r := runConnect(t, cfg.path, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`+"\n", "demo")
	assert.NotZero(t, r.code, "connect must fail")
	assert.Empty(t, r.stdout, "nothing reached the client either")
	assert.Contains(t, r.stderr, cfg.sockets)
	assert.Contains(t, r.stderr, "owned by uid 65534")
	entries, err := os.ReadDir(cfg.sockets)
	require.NoError(t, err)
	assert.Empty(t, entries, "no daemon was started in the foreign folder")

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--config", cfg.path).CombinedOutput()
	require.Error(t, err, "status must fail: %s", out)
	assert.Contains(t, string(out), cfg.sockets)
	assert.Contains(t, string(out), "owned by uid 65534")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(string(out)), "\n")+1, "one line: %s", out)
}
