package main

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/mcpmux/mcpmux/socket"
)

// How the commands that dial the daemon say that they could not: once, in
// plain words, without the layers of wrapping the HTTP client and the dial
// put around the cause ("Get ...: dial X: socket dir Y: lstat Y: ...").

// plainDialError is the cause of a failed dial, as the OS says it: "no
// such file or directory" (no socket, or no folder: nothing has served
// there), "connection refused" (a socket left by a daemon that died).
func plainDialError(err error) error {
	if r := socket.Refusal(err); r != nil {
		return r
	}
	if errors.Is(err, fs.ErrNotExist) {
		return syscall.ENOENT
	}
	return socket.Cause(err)
}

// noDaemon is the error of a control request that reached no daemon on
// path: a refused folder or listener as such, else that no daemon answers.
func noDaemon(path string, err error) error {
	if r := socket.Refusal(err); r != nil {
		return r
	}
	return fmt.Errorf("no mcpmux daemon answers on %s: %w", path, plainDialError(err))
}
