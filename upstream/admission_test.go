package upstream_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/upstream"
)

// SendLaterWait waits where Send refuses: with the queue at twice
// WriteQueueBytes it holds on until the server reads, then queues the
// frame; a caller that stops waiting gets ErrStopped, and nothing it sent
// is queued.
func TestSendLaterWaitWaitsForRoom(t *testing.T) {
	t.Parallel()
	const soft = 256 << 10
	cfg := fakeConfig(t, "no-read", "")
	cfg.WriteQueueBytes = soft
	p, rec, _ := start(t, cfg)
	rec.waitReady(t)

	frame := blob(200 << 10)
	n := len(frame) + 1
	require.NoError(t, p.Send(frame))
	require.NoError(t, p.Send(frame))
	require.ErrorIs(t, p.Send(frame), upstream.ErrQueueFull)

	stop := make(chan struct{})
	stopped := make(chan error, 1)
	go func() { stopped <- p.SendLaterWait(stop, frame) }()
	close(stop)
	select {
	case err := <-stopped:
		assert.ErrorIs(t, err, upstream.ErrStopped)
	case <-time.After(patience):
		require.FailNow(t, "SendLaterWait did not stop")
	}
	assert.Equal(t, 2*n, p.Queued(), "a frame whose wait stopped is not queued")

	waited := make(chan error, 1)
	go func() { waited <- p.SendLaterWait(nil, frame) }()
	require.NoError(t, syscall.Kill(p.Pid(), syscall.SIGUSR1)) // start reading
	select {
	case err := <-waited:
		assert.NoError(t, err)
	case <-time.After(patience):
		require.FailNow(t, "SendLaterWait not released after the queue drained")
	}
	p.Flush()
	require.Eventually(t, func() bool { return p.Queued() == 0 }, patience, 5*time.Millisecond)
	call(t, p, rec, 1, "ping")
	assert.ErrorIs(t, p.SendLaterWait(nil, blob(2*soft)), upstream.ErrQueueFull, "over the bound even alone: refused at once")
}
