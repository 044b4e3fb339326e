package daemon_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestClient: the Client asks a running daemon for its status, a restart,
// a reload and a server's logs, and a refusal comes back in the daemon's
// own words.
func TestClient(t *testing.T) {
	r := start(t, daemon.Config{Servers: []daemon.Server{fake(t, "a", "a")}, Version: "v-test",
		Reload: func() (daemon.Reloaded, error) {
			return daemon.Reloaded{Servers: []daemon.Server{fake(t, "a", "a"), fake(t, "b", "b")}}, nil
		}})
	c := daemon.NewClient(r.dir)
	dial(t, r.socket("a"))

	st, err := c.Status(t.Context())
	require.NoError(t, err)
	assert.Equal(t, [3]any{"v-test", os.Getpid(), 1}, [3]any{st.Version, st.Pid, len(st.Servers)}, "Status")

	assert.NoError(t, c.Restart(t.Context(), "a"), "Restart a")
	assert.EqualError(t, c.Restart(t.Context(), "nope"), `no server named "nope"`, "Restart of an unknown server")

	res, err := c.Reload(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, res.Added, "Reload adds b")

	testutil.Eventually(t, within, "the logs of a say it is ready", func() (bool, error) {
		logs, err := c.Logs(t.Context(), "a", false)
		if err != nil {
			return false, err
		}
		defer logs.Close()
		b, err := io.ReadAll(logs)
		return strings.Contains(string(b), "server ready"), err
	})
	_, err = c.Logs(t.Context(), "nope", false)
	assert.EqualError(t, err, `no server named "nope"`, "Logs of an unknown server")
}

// TestClientWithoutDaemon: a folder where no daemon serves is said once,
// in plain words.
func TestClientWithoutDaemon(t *testing.T) {
	dir := filepath.Join(testutil.ShortDir(t), "s")
	_, err := daemon.NewClient(dir).Status(t.Context())
	assert.EqualError(t, err, "no mcpmux daemon answers on "+dir+"/.control.sock (no such file or directory): start one with `mcpmux serve`")

	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err = daemon.NewClient(dir).Status(t.Context())
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "socket dir "+dir+" has mode 0755"), "a folder open to others: the refusal alone: %v", err)
}
