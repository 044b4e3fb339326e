//go:build unix

package main

import (
	"io"
	"os"
	"syscall"
)

// pollableStdin returns stdin as a file in the runtime's poller when it
// is a pipe or a socket of its own, in blocking mode as a parent leaves
// it: connect's reads of it then wait in the poller, like its socket's,
// instead of holding a thread in a blocking read for each line. restore
// puts the blocking mode back, for whoever shares the pipe after us. A
// terminal, a file, or a descriptor that stdout or stderr shares (whose
// writes would start failing with EAGAIN) is left as it is.
func pollableStdin(in io.Reader) (r io.Reader, restore func()) {
	f, ok := in.(*os.File)
	if !ok {
		return in, func() {}
	}
	in0 := int(f.Fd()) // 0, but for tests
	var st syscall.Stat_t
	if syscall.Fstat(in0, &st) != nil {
		return in, func() {}
	}
	if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
		return in, func() {}
	}
	for _, fd := range []int{1, 2} {
		var o syscall.Stat_t
		if syscall.Fstat(fd, &o) == nil && o.Dev == st.Dev && o.Ino == st.Ino {
			return in, func() {}
		}
	}
	fd, err := syscall.Dup(in0) // of the same open file: the mode is shared
	if err != nil {
		return in, func() {}
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return in, func() {}
	}
	p := os.NewFile(uintptr(fd), "stdin")
	return p, func() {
		syscall.SetNonblock(fd, false)
		p.Close()
	}
}
