package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/mcpmux/mcpmux/daemon"
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

// autostartOff returns nil when a daemon serves sock, and otherwise the
// reason connect, told not to start one, cannot go on: nothing serves there
// and auto-start is off (by the config or by --no-autostart), or the daemon
// on that folder has no such server.
func autostartOff(ctx context.Context, cfg *config, sock string, byFlag bool) error {
	ok, err := answers(ctx, sock) // its only errors are refusals
	if ok || err != nil {
		return dirRefusal(err)
	}
	dir := filepath.Dir(sock)
	if up, err := answers(ctx, filepath.Join(dir, daemon.ControlSocket)); up || err != nil {
		if err != nil {
			return dirRefusal(err)
		}
		return fmt.Errorf("the mcpmux daemon on %s serves no %s (is it running another config?)", dir, filepath.Base(sock))
	}
	why := "autostart = false in [daemon]"
	if byFlag {
		why = "--no-autostart was given"
	}
	serve := "mcpmux serve"
	if cfg.Path != "" {
		serve += " --config " + cfg.Path
	}
	return fmt.Errorf("no mcpmux daemon is serving %s, and auto-start is off (%s): start one with `%s`, or as a service (`mcpmux service install`)", sock, why, serve)
}
