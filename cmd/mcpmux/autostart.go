package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/socket"
)

// Auto-start: when `mcpmux connect` finds no daemon, it starts one (`mcpmux
// serve` with the same config, in a session of its own, logging to the state
// folder) and connects once it listens. A lock in socket_dir makes many
// connects started at once start exactly one daemon.

const (
	autostartLock    = ".autostart.lock"
	autostartTimeout = 15 * time.Second
)

// answers reports whether a daemon of this user answers on path. A
// socket folder or a listener that is not this user's is an error, not a
// missing daemon: nothing is started in its place and nothing sent to it.
func answers(ctx context.Context, path string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := socket.Dial(ctx, path)
	if errors.Is(err, socket.ErrUnsafeDir) || errors.Is(err, socket.ErrForeignPeer) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	c.Close()
	return true, nil
}

// ensureDaemon returns once a daemon answers on sock, starting one when
// none does.
func ensureDaemon(ctx context.Context, t *target, sock string) error {
	if ok, err := answers(ctx, sock); ok || err != nil {
		return err
	}
	dir, cfg := t.dir, t.cfg
	if err := socket.PrepareDir(dir); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, autostartLock))
	if err != nil {
		return err
	}
	defer unlock()
	if ok, err := answers(ctx, sock); ok || err != nil { // another connect started it while we waited
		return err
	}
	if ok, err := answers(ctx, filepath.Join(dir, daemon.ControlSocket)); ok || err != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("the mcpmux daemon on %s does not serve %s (is it running another config?)", dir, filepath.Base(sock))
	}
	if cfg.Path == "" {
		return errors.New("cannot start a daemon without a config file")
	}

	state, err := stateDir(os.Getenv)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("state folder: %w", err)
	}
	logPath := filepath.Join(state, "mcpmux.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	defer logf.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the mcpmux executable: %w", err)
	}
	cmd := exec.Command(exe, "serve", "--config", cfg.Path, "--"+autostartedFlag)
	cmd.Stderr = logf // stdin and stdout stay /dev/null: the daemon's stdout is unused
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start a daemon: %w", err)
	}
	// The daemon outlives this bridge. If it dies while the bridge lives,
	// this reaps it; once the bridge exits, init adopts it.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.NewTimer(autostartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := answers(ctx, sock)
		if ok || err != nil {
			return err
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the daemon it started exited (%v); see %s%s", err, logPath, lastLine(logPath))
		case <-deadline.C:
			return fmt.Errorf("the daemon it started did not listen on %s within %s; see %s", sock, autostartTimeout, logPath)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// lastLine is the last line of a log file, for an error message.
func lastLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return ": " + lines[len(lines)-1]
}

// lockFile takes an exclusive flock on path, waiting for it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("auto-start lock: %w", err)
	}
	deadline := time.Now().Add(autostartTimeout + 5*time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("auto-start lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
