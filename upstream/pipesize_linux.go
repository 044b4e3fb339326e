package upstream

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdoutPipeSize is what growPipe asks for: a large answer then crosses
// the server's stdout in a few reads, not one per 64 KiB (the default).
const stdoutPipeSize = 1 << 20

// growPipe enlarges a pipe's buffer, as far as the system lets an
// unprivileged process (fs.pipe-max-size, 1 MiB by default); a refusal
// leaves it as it was.
func growPipe(f *os.File) {
	raw, err := f.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		unix.FcntlInt(fd, unix.F_SETPIPE_SZ, stdoutPipeSize)
	})
}
