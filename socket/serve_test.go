//go:build unix

package socket_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

func TestServeRunsHandlersConcurrentlyAndWaitsForThem(t *testing.T) {
	path := filepath.Join(preparedDir(t), "s.sock")
	l, err := socket.ListenUnix(path)
	require.NoError(t, err)
	defer l.Close()

	const clients = 3
	started := make(chan struct{}, clients)
	release := make(chan struct{})
	var finished atomic.Int32
	handle := func(ctx context.Context, c net.Conn) {
		defer c.Close()
		started <- struct{}{}
		<-release // ignores ctx on purpose: Serve must wait anyway
		finished.Add(1)
	}

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { served <- socket.Serve(ctx, l, handle) })
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer func() { // also on a failed assertion: never leave Serve behind
		cancel()
		releaseOnce()
		wg.Wait()
	}()

	for range clients {
		c, err := net.Dial("unix", path)
		require.NoError(t, err)
		defer c.Close()
	}
	// All handlers are blocked at once: each runs in its own goroutine.
	for i := range clients {
		select {
		case <-started:
		case <-t.Context().Done():
			t.Fatalf("only %d of %d handlers started", i, clients)
		}
	}

	cancel()
	// The listener closes at once, but Serve waits for the handlers.
	testutil.Until(t, 5*time.Second, "the listener to close", func() bool {
		_, err := os.Lstat(path) // Close removes the socket file
		return errors.Is(err, fs.ErrNotExist)
	})
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v while handlers were running", err)
	default:
	}

	releaseOnce()
	assert.NoError(t, <-served)
	assert.Equal(t, int32(clients), finished.Load(), "handlers finished before Serve returned")
}

func TestServeWithDoneContextClosesListener(t *testing.T) {
	l, err := socket.ListenUnix(filepath.Join(preparedDir(t), "s.sock"))
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	assert.NoError(t, socket.Serve(ctx, l, func(context.Context, net.Conn) { t.Error("handler called") }))
	_, err = l.Accept()
	assert.ErrorIs(t, err, net.ErrClosed)
}

// failingListener fails every Accept with err.
type failingListener struct{ err error }

func (f failingListener) Accept() (net.Conn, error) { return nil, f.err }
func (f failingListener) Close() error              { return nil }
func (f failingListener) Addr() net.Addr            { return &net.UnixAddr{Name: "fake", Net: "unix"} }

func TestServeReturnsPermanentAcceptError(t *testing.T) {
	boom := errors.New("boom")
	err := socket.Serve(t.Context(), failingListener{boom}, func(context.Context, net.Conn) {})
	assert.ErrorIs(t, err, boom)
}
