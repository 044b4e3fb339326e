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

// dirRefusal returns the error socket.Dial refused with when it refused (a
// socket folder or a listener that is not this user's); its text names
// the folder and what is wrong with it. nil when err is no refusal.
func dirRefusal(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if k := errors.Unwrap(e); k == socket.ErrUnsafeDir || k == socket.ErrForeignPeer {
			return e
		}
	}
	return nil
}

// plainDialError is the cause of a failed dial, as the OS says it: "no
// such file or directory" (no socket, or no folder: nothing has served
// there), "connection refused" (a socket left by a daemon that died).
func plainDialError(err error) error {
	if r := dirRefusal(err); r != nil {
		return r
	}
	if errors.Is(err, fs.ErrNotExist) {
		return syscall.ENOENT
	}
	return unwrapSyscall(err)
}

// noDaemon is the error of a control request that reached no daemon on
// path: a refused folder or listener as such, else that no daemon answers.
func noDaemon(path string, err error) error {
	if r := dirRefusal(err); r != nil {
		return r
	}
	return fmt.Errorf("no mcpmux daemon answers on %s: %w", path, plainDialError(err))
}

// autostartOff is why connect cannot go on when no daemon serves sock and
// it may not start one: off says who turned auto-start off.
func autostartOff(t *target, sock, off string) error {
	serve := "mcpmux serve"
	if t.path != "" {
		serve += " --config " + t.path
	}
	return fmt.Errorf("no mcpmux daemon is serving %s, and auto-start is off (%s): start one with `%s`, or as a service (`mcpmux service install`)", sock, off, serve)
}
