package outbox

import (
	"errors"
	"syscall"
)

// TryWriteRaw is the heart of a Writer's TryWrite on a descriptor in the
// runtime's poller (a socket, a pipe): it writes b as far as the
// descriptor takes it without blocking. It reports false when nothing was
// written (the buffer is full, or there is an error, which the next
// blocking write meets); when only part was, it reports more and returns a
// copy of the rest, which the Writer must send first on its next write.
func TryWriteRaw(raw syscall.RawConn, b []byte) (ok, more bool, rest []byte) {
	n := 0
	err := raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if err != nil {
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				return true // EAGAIN, or an error the blocking write will meet
			}
			n += m
		}
		return true // done either way: never wait for the descriptor
	})
	switch {
	case err != nil || n <= 0:
		return false, false, nil
	case n < len(b):
		return true, true, append([]byte(nil), b[n:]...)
	}
	return true, false, nil
}
