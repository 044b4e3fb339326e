package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestDescriptorShortageSpellLeavesTheServerServing: the daemon's soft
// RLIMIT_NOFILE is cut to 3 (no descriptor can be had: 0-2 are taken) for a
// 10 s spell, during which its server is killed. Every start meanwhile fails
// with EMFILE, many more times than max_restarts, and none counts as a
// crash: after the spell the server is ready, not failed, the request sent
// during the spell is answered, and a new session is served.
func TestDescriptorShortageSpellLeavesTheServerServing(t *testing.T) {
	const spell = 10 * time.Second
	d := startDaemon(t, demo("demo", nil, `max_restarts = 2`, `restart_window = "1m"`,
		`restart_backoff = "50ms"`, `restart_backoff_max = "400ms"`, `start_timeout = "1m"`), "")
	c := open(t, d.socket("demo"))
	pid := c.mustStats(t).PID

	var old unix.Rlimit
	require.NoError(t, unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_NOFILE, nil, &old))
	restored := false
	restore := func() {
		if !restored {
			restored = true
			require.NoError(t, unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_NOFILE, &old, nil))
		}
	}
	defer restore()
	require.NoError(t, unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 3, Max: old.Max}, nil))
	began := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	const shortLine = "server did not start for want of machine resources"
	testutil.Until(t, spell, "starts failing with EMFILE", func() bool {
		return strings.Count(d.log(), shortLine) > 3
	})
	require.NoError(t, c.send(toolCall(`"during"`, "echo", map[string]string{"text": "held through the spell"})))
	// The spell lasts its 10 s: nothing to wait for but the time itself.
	<-time.After(time.Until(began.Add(spell)))
	tries := strings.Count(d.log(), shortLine)
	restore()

	m, _, err := c.await(`"during"`)
	require.NoError(t, err)
	text, err := resultText(m)
	require.NoError(t, err, "%s", m.Frame)
	assert.Equal(t, "held through the spell", text)
	assert.Greater(t, tries, 5, "starts failed for the shortage many times over max_restarts")
	assert.Contains(t, d.log(), "too many open files")
	assert.NotContains(t, d.log(), "server failed", "a shortage is no crash")
	st := gpServerStatus(t, d, "demo")
	assert.Equal(t, "ready", st.State)
	assert.NotEqual(t, pid, st.Pid, "a new process")
	assert.NoError(t, open(t, d.socket("demo")).echo(`"after"`, "after the spell"))
	t.Logf("%d starts failed with EMFILE over the %v spell; served %v after it ended", tries, spell, time.Since(began)-spell)
}
