package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/mux"
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

// notServedError: a daemon holds the socket folder but does not serve the
// server asked for; it says what it serves.
type notServedError struct{ msg string }

func (e *notServedError) Error() string { return e.msg }

// reach returns once a daemon answers on the socket of server name. A
// daemon that is starting is waited for; when none runs, one is started,
// unless off says why auto-start is off. Many connects started at once start exactly one, and a
// `serve` started by hand takes the same lock while it opens its sockets.
func reach(ctx context.Context, t *target, name string, off string) error {
	sock := t.socket(name)
	ok, err := answers(ctx, sock)
	if ok || err != nil {
		return dirRefusal(err)
	}
	if running, err := awaitServing(ctx, t, name); running || err != nil {
		return err
	}
	if off != "" {
		return autostartOff(t, sock, off)
	}
	if err := socket.PrepareDir(t.dir); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, filepath.Join(t.dir, autostartLock))
	if err != nil {
		return err
	}
	defer unlock()
	// Another connect, or a serve, may have started one while we waited.
	if ok, err := answers(ctx, sock); ok || err != nil {
		return err
	}
	if running, err := awaitServing(ctx, t, name); running || err != nil {
		return err
	}
	if err := startDaemon(ctx, t.cfg, sock); err != nil {
		return fmt.Errorf("no mcpmux daemon is serving %s, and starting one failed: %w", sock, err)
	}
	return nil
}

// awaitServing waits for the daemon that holds t's socket folder, if one
// does, to serve name. A daemon opens its control socket first and answers
// on it once every server's socket is open, so its status says what it
// serves. running is false when no daemon holds the folder.
func awaitServing(ctx context.Context, t *target, name string) (running bool, err error) {
	if ok, err := answers(ctx, filepath.Join(t.dir, daemon.ControlSocket)); !ok || err != nil {
		return false, err
	}
	sctx, cancel := context.WithTimeout(ctx, autostartTimeout)
	defer cancel()
	var st daemon.Status
	if err := control(sctx, t.dir, http.MethodGet, "/status", &st); err != nil {
		return true, fmt.Errorf("a daemon holds %s but does not answer: %w", t.dir, err)
	}
	if !slices.ContainsFunc(st.Servers, func(s mux.Status) bool { return s.Name == name }) {
		return true, notServed(t, st, name)
	}
	// It serves name: its socket is open, or a reload is putting it back.
	deadline := time.Now().Add(2 * time.Second)
	for {
		ok, err := answers(ctx, t.socket(name))
		switch {
		case ok || err != nil:
			return true, err
		case time.Now().After(deadline):
			return true, fmt.Errorf("the daemon on %s lists %s but does not answer on %s", t.dir, name, t.socket(name))
		}
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// notServed says what the daemon on t's folder serves instead of name.
func notServed(t *target, st daemon.Status, name string) error {
	names := make([]string, len(st.Servers))
	for i, s := range st.Servers {
		names[i] = s.Name
	}
	serves := "no server"
	if len(names) > 0 {
		serves = strings.Join(names, ", ")
	}
	hint := ""
	switch {
	case st.Config != "" && canonicalConfig(st.Config) != canonicalConfig(t.path):
		hint = fmt.Sprintf(" (it runs %s, not %s)", st.Config, t.path)
	case t.cfg != nil && t.cfg.Server(name) != nil:
		hint = fmt.Sprintf("; %s is in %s: run `mcpmux reload` to serve it", name, t.path)
	}
	return &notServedError{fmt.Sprintf("the mcpmux daemon on %s (pid %d) does not serve %s; it serves %s%s", t.dir, st.Pid, name, serves, hint)}
}

// startDaemon starts `mcpmux serve` for cfg, in a session of its own and
// logging to the state folder, and returns once it answers on sock.
func startDaemon(ctx context.Context, cfg *config.Config, sock string) error {
	if cfg == nil || cfg.Path == "" {
		return errors.New("cannot start a daemon without a config file that loads")
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
	// The daemon logs into logPath itself, rotating it by size; its stderr
	// goes there too, for what comes before the log is open or outside it
	// (a panic).
	cmd := exec.Command(exe, "serve", "--config", cfg.Path, "--"+autostartedFlag, "--"+logFileFlag, logPath)
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
