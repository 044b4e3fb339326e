//go:build unix

package socket

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptedListener returns the scripted Accept results in order, then blocks
// until Close. It carries a logger the way *Listener does.
type scriptedListener struct {
	log    *slog.Logger
	script []error // nil entries yield a connection
	conns  []net.Conn

	mu      sync.Mutex
	idle    chan struct{} // closed when the script is used up
	closed  chan struct{}
	closeMu sync.Once
}

func (s *scriptedListener) Accept() (net.Conn, error) {
	s.mu.Lock()
	if len(s.script) == 0 {
		s.mu.Unlock()
		s.closeIdle()
		<-s.closed
		return nil, net.ErrClosed
	}
	err := s.script[0]
	s.script = s.script[1:]
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	a, b := net.Pipe()
	s.mu.Lock()
	s.conns = append(s.conns, b)
	s.mu.Unlock()
	return a, nil
}

func (s *scriptedListener) closeIdle() {
	select {
	case <-s.idle:
	default:
		close(s.idle)
	}
}

func (s *scriptedListener) Close() error {
	s.closeMu.Do(func() { close(s.closed) })
	return nil
}

func (s *scriptedListener) Addr() net.Addr       { return &net.UnixAddr{Name: "scripted", Net: "unix"} }
func (s *scriptedListener) logger() *slog.Logger { return s.log }

func TestServeRetriesTemporaryErrorsAndLogsOncePerStreak(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept", syscall.EMFILE)}
	enfile := &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept", syscall.ENFILE)}
	rec := &LogRecorder{}
	l := &scriptedListener{
		log:    slog.New(rec),
		script: []error{emfile, emfile, emfile, nil, enfile, nil},
		idle:   make(chan struct{}),
		closed: make(chan struct{}),
	}
	var handled sync.WaitGroup
	handled.Add(2)
	handle := func(_ context.Context, c net.Conn) {
		c.Close()
		handled.Done()
	}

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { served <- Serve(ctx, l, handle) })

	select {
	case <-l.idle:
	case <-t.Context().Done():
		t.Fatal("Serve did not get through the script")
	}
	handled.Wait()
	cancel()
	require.NoError(t, <-served)
	wg.Wait()
	for _, c := range l.conns {
		c.Close()
	}

	warn := func(err error) Record {
		return Record{Level: slog.LevelWarn, Msg: "accept failed; retrying with backoff",
			Attrs: map[string]any{"addr": "scripted", "err": err}}
	}
	assert.Equal(t, []Record{warn(emfile), warn(enfile)}, rec.Records())
}

func TestIsTemporary(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept", syscall.EMFILE)}, true},
		{syscall.ENOBUFS, true},
		{net.ErrClosed, false},
		{errors.New("boom"), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, isTemporary(tt.err), "isTemporary(%v)", tt.err)
	}
}
