package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestAutostartStartsOneDaemon: ten `mcpmux connect` at once with no daemon
// running start exactly one, and all ten sessions are served. The daemon
// then leaves by itself once idle (idle_exit).
func TestAutostartStartsOneDaemon(t *testing.T) {
	cfg := writeConfig(t, demo("demo", nil), "")
	text, err := os.ReadFile(cfg.path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg.path, []byte(strings.Replace(string(text), "[daemon]\n", "[daemon]\nidle_exit = \"2s\"\n", 1)), 0o600))
	state := filepath.Join(cfg.dir, "state")

	var wg sync.WaitGroup
	outs := make([]string, 10)
	for i := range outs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			cmd := mcpmux(ctx, "connect", "--config", cfg.path, "demo")
			cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "GORACE=atexit_sleep_ms=50")
			cmd.Stdin = strings.NewReader(fmt.Sprintf(
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`+"\n"+
					`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi %d"}}}`+"\n", i))
			out, err := cmd.Output()
			assert.NoError(t, err, "connect %d", i)
			outs[i] = string(out)
		})
	}
	wg.Wait()
	for i, out := range outs {
		assert.Contains(t, out, fmt.Sprintf(`"text":"hi %d"`, i), "connect %d got its answer", i)
	}
	st := status(t, cfg.path)
	require.NotZero(t, st.Pid)
	logText, err := os.ReadFile(filepath.Join(state, "mcpmux", "mcpmux.log"))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(logText), `msg="mcpmux serving"`), "exactly one daemon started:\n%s", logText)

	took := testutil.Eventually(t, 10*time.Second, "the idle daemon exits", func() (bool, error) { return gone(st.Pid), nil })
	t.Logf("the auto-started daemon exited %v after the last session (idle_exit 2s)", took)
	if !gone(st.Pid) {
		syscall.Kill(st.Pid, syscall.SIGKILL)
	}
}
