package session_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestLocks keeps what docs/ARCHITECTURE.md says of session's locks: the
// only lock held across I/O is a WebSocket's writer lock, around its own
// writes, each under a deadline.
func TestLocks(t *testing.T) {
	const writeLock = "wsWriter's lock is the connection's write lock: it keeps the session's frames and the pings and pongs from interleaving, and each write under it has a deadline"
	testutil.CheckLocks(t, ".", testutil.LockRules{
		Allowed: map[string]string{
			"(net.Conn).SetWriteDeadline": writeLock,
			"(net.Conn).Write":            writeLock,
			"(*net.Buffers).WriteTo":      writeLock,
		},
	}, 1)
}
