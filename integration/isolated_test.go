package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestIsolatedSessionsGetTheirOwnProcess: share = "isolated" gives each
// session a server process of its own, and each goes when its session does.
func TestIsolatedSessionsGetTheirOwnProcess(t *testing.T) {
	d := startDaemon(t, demo("iso", nil, `share = "isolated"`, `stdin_grace = "500ms"`, `term_grace = "500ms"`), "")
	a, b := open(t, d.socket("iso")), open(t, d.socket("iso"))
	sa, sb := a.mustStats(t), b.mustStats(t)
	assert.NotEqual(t, sa.PID, sb.PID, "two processes")
	assert.Equal(t, 1, sa.Initialize, "each initialized once")
	assert.Equal(t, 1, sb.Initialize)
	a.close()
	b.close()
	took := testutil.Eventually(t, 500*time.Millisecond+500*time.Millisecond+time.Second, "both processes gone", func() (bool, error) {
		return gone(sa.PID) && gone(sb.PID), nil
	})
	t.Logf("both processes gone %v after their sessions left", took)
}
