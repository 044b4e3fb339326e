package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestStateFolderOnlyItsUser: in a state folder made 0777, another user's
// token, a log that is a symlink to another file, and another user's HTTP
// session record are each refused or repaired by the daemon, and its log
// says so; the folder is set back to 0700. A 400 MB session record (sparse)
// is refused without being read: the daemon's RSS stays flat. The parts
// that need another uid (65534) run as root only.
func TestStateFolderOnlyItsUser(t *testing.T) {
	t.Parallel()
	root := os.Getuid() == 0
	if !root {
		t.Log("not root: another user's token and session record cannot be made; only the symlink, the mode and the size are tried")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cfg := writeConfig(t, demo("demo", nil), fmt.Sprintf("http = %q", addr))
	state := filepath.Join(cfg.dir, "state")
	folder := filepath.Join(state, "mcpmux")
	require.NoError(t, os.MkdirAll(folder, 0o700))
	require.NoError(t, os.Chmod(folder, 0o777))

	// Another user's token, mode 0600.
	const theirToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tokenFile := filepath.Join(folder, "http.token")
	if root {
		require.NoError(t, os.WriteFile(tokenFile, []byte(theirToken+"\n"), 0o600))
		require.NoError(t, os.Chown(tokenFile, 65534, 65534))
	}
	// The log, a symlink to a file of someone else's choosing.
	victim := filepath.Join(cfg.dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious\n"), 0o600))
	logPath := filepath.Join(folder, "mcpmux.log")
	require.NoError(t, os.Symlink(victim, logPath))
	// The session records: another user's, and a 400 MB one of ours.
	sessions := filepath.Join(folder, "http-sessions")
	require.NoError(t, os.Mkdir(sessions, 0o700))
	require.NoError(t, os.Chmod(sessions, 0o777))
	record := func(id string) []byte {
		b, err := json.Marshal(map[string]any{"id": id, "server": "demo", "initialized": true,
			"initialize": json.RawMessage(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"theirs","version":"1"}}}`)})
		require.NoError(t, err)
		return b
	}
	const theirSession, bigSession = "THEIRSESSIONAAAAAAAAAAAAAA", "BIGSESSIONAAAAAAAAAAAAAAAA"
	if root {
		p := filepath.Join(sessions, theirSession+".json")
		require.NoError(t, os.WriteFile(p, record(theirSession), 0o600))
		require.NoError(t, os.Chown(p, 65534, 65534))
	}
	big := filepath.Join(sessions, bigSession+".json")
	require.NoError(t, os.WriteFile(big, record(bigSession), 0o600))
	require.NoError(t, os.Truncate(big, 400<<20))

	// The daemon as auto-start runs it: logging into the state folder.
	d := &daemon{daemonConfig: cfg, tb: t, exited: make(chan struct{})}
	d.cmd = mcpmux(context.Background(), "serve", "--config", cfg.path, "--autostarted", "--log-file", logPath)
	d.cmd.Env = append(d.cmd.Environ(), "XDG_STATE_HOME="+state)
	d.cmd.Stdout, d.cmd.Stderr = &d.stdout, &d.stderr
	d.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, d.cmd.Start())
	trackDaemon(d, true)
	go func() { // owned by stop
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(d.stop)
	d.waitReady()
	testutil.Until(t, readyTimeout, "the web listener accepts connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	readLog := func() string {
		b, err := os.ReadFile(logPath)
		require.NoError(t, err)
		return string(b)
	}

	fi, err := os.Stat(folder)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the state folder is ours again")
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious\n", string(b), "nothing was logged through the link")
	li, err := os.Lstat(logPath)
	require.NoError(t, err)
	assert.True(t, li.Mode().IsRegular(), "the log is a file of its own")
	tb, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	token := strings.TrimSpace(string(tb))
	assert.NotEqual(t, theirToken, token, "their token is not served with")

	post := func(tok, sid string) int {
		req, err := http.NewRequest("POST", "http://"+addr+"/servers/demo",
			strings.NewReader(string(toolCall("1", "echo", map[string]any{"text": "x"}))))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := (&http.Client{Timeout: ioTimeout}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	before := rssOf(t, d.cmd.Process.Pid)
	assert.Equal(t, http.StatusNotFound, post(token, bigSession), "the 400 MB record is not restored")
	after := rssOf(t, d.cmd.Process.Pid)
	t.Logf("daemon RSS around the 400 MB record: %d KiB before, %d KiB after", before>>10, after>>10)
	assert.Less(t, after, before+32<<20, "RSS stays flat: the record is not read")
	if root {
		assert.Equal(t, http.StatusUnauthorized, post(theirToken, theirSession), "their token is refused")
		assert.Equal(t, http.StatusNotFound, post(token, theirSession), "their record is not restored")
	}

	log := readLog()
	for _, want := range []string{
		"state folder " + folder + " had mode 0777; set it to 0700",
		"removed a log file that was refused and started a new one: " + logPath + " is a symlink",
		"removed a session record that is refused: too large",
		big + " has 419430400 bytes, more than",
	} {
		assert.Contains(t, log, want)
	}
	if root {
		assert.Regexp(t, regexp.MustCompile(`removed a token file that was refused.*`+regexp.QuoteMeta(tokenFile)+` is owned by uid 65534`), log)
		assert.Regexp(t, regexp.MustCompile(`removed a session record that is refused: not a private file of this user.*`+theirSession+`\.json is owned by uid 65534`), log)
	}
	assert.NoFileExists(t, big, "the refused record is removed")
}

// rssOf is the resident set of process pid, from /proc.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc to read the daemon's RSS: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}
