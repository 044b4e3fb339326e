package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/statefile"
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

// Answers reports whether a daemon of this user answers on the socket at
// path. A socket folder or a listener that is not this user's is an error,
// not a missing daemon: nothing is started in its place and nothing sent
// to it.
func Answers(ctx context.Context, path string) (bool, error) {
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

// reach returns once a daemon answers on the socket of the server. A
// daemon that is starting is waited for; when none runs, one is started,
// unless off says why auto-start is off. Many connects started at once start exactly one, and a
// `serve` started by hand takes the same lock while it opens its sockets
// (AutostartLock).
func (d *dialer) reach(ctx context.Context, t *Target, off string) error {
	sock := t.socket(d.name)
	ok, err := Answers(ctx, sock)
	if ok || err != nil {
		return socket.Refusal(err)
	}
	if running, err := d.awaitServing(ctx, t); running || err != nil {
		return err
	}
	if off != "" {
		return autostartOff(t, sock, off)
	}
	if err := socket.PrepareDir(t.Dir); err != nil {
		return err
	}
	unlock, err := AutostartLock(ctx, t.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	// Another connect, or a serve, may have started one while we waited.
	if ok, err := Answers(ctx, sock); ok || err != nil {
		return err
	}
	if running, err := d.awaitServing(ctx, t); running || err != nil {
		return err
	}
	if err := d.startDaemon(ctx, t, sock); err != nil {
		return fmt.Errorf("no mcpmux daemon is serving %s, and starting one failed: %w", sock, err)
	}
	return nil
}

// awaitServing waits for the daemon that holds t's socket folder, if one
// does, to serve the server. A daemon opens its control socket first and
// answers on it once every server's socket is open, so its status says
// what it serves. running is false when no daemon holds the folder.
func (d *dialer) awaitServing(ctx context.Context, t *Target) (running bool, err error) {
	name := d.name
	if ok, err := Answers(ctx, filepath.Join(t.Dir, daemon.ControlSocket)); !ok || err != nil {
		return false, err
	}
	sctx, cancel := context.WithTimeout(ctx, autostartTimeout)
	defer cancel()
	st, err := d.status(sctx, t.Dir)
	if err != nil {
		return true, fmt.Errorf("a daemon holds %s but does not answer: %w", t.Dir, err)
	}
	if !slices.ContainsFunc(st.Servers, func(s mux.Status) bool { return s.Name == name }) &&
		!slices.ContainsFunc(st.Endpoints, func(e daemon.EndpointStatus) bool { return e.Name == name }) {
		return true, d.notServed(t, st)
	}
	// It serves name: its socket is open, or a reload is putting it back.
	deadline := time.Now().Add(2 * time.Second)
	for {
		ok, err := Answers(ctx, t.socket(name))
		switch {
		case ok || err != nil:
			return true, err
		case time.Now().After(deadline):
			return true, fmt.Errorf("the daemon on %s lists %s but does not answer on %s", t.Dir, name, t.socket(name))
		}
		select {
		case <-ctx.Done():
			return true, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// notServed says what the daemon on t's folder serves instead of the
// server.
func (d *dialer) notServed(t *Target, st daemon.Status) error {
	name := d.name
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
	case st.Config != "" && !d.sameConfig(st.Config, t.Path):
		hint = fmt.Sprintf(" (it runs %s, not %s)", st.Config, t.Path)
	case t.Loaded && (slices.Contains(t.Servers, name) || slices.Contains(t.Endpoints, name)):
		hint = fmt.Sprintf("; %s is in %s: run `mcpmux reload` to serve it", name, t.Path)
	}
	return &notServedError{fmt.Sprintf("the mcpmux daemon on %s (pid %d) does not serve %s; it serves %s%s", t.Dir, st.Pid, name, serves, hint)}
}

// startDaemon starts a daemon for t's config file (t.Serve), in a session
// of its own and logging to the state folder, and returns once it answers
// on sock.
func (d *dialer) startDaemon(ctx context.Context, t *Target, sock string) error {
	if t.Serve == nil {
		return errors.New("cannot start a daemon without a config file that loads")
	}
	state, err := d.stateDir()
	if err != nil {
		return err
	}
	// The folder and the log in it follow statefile's rules: a folder of
	// ours open to others is made private, another user's is refused, a
	// log that is a link or not ours is replaced; the log says what was
	// repaired.
	dirNote, err := statefile.PrepareDir(state)
	if err != nil {
		return err
	}
	logPath := filepath.Join(state, "mcpmux.log")
	logf, logNote, err := statefile.OpenLog(logPath)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	defer logf.Close()
	for _, note := range []string{dirNote, logNote} {
		if note != "" {
			fmt.Fprintf(logf, "mcpmux connect: %s\n", note)
		}
	}
	// The daemon logs into logPath itself, rotating it by size; its stderr
	// goes there too, for what comes before the log is open or outside it
	// (a panic).
	cmd, err := t.Serve(logPath)
	if err != nil {
		return err
	}
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
		ok, err := Answers(ctx, sock)
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

// lastLine is the last line of a log file, for an error message: read
// from its last few KiB only, as statefile opens it (no link followed).
func lastLine(path string) string {
	f, fi, err := statefile.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 4 << 10
	b := make([]byte, min(fi.Size(), tail))
	n, _ := f.ReadAt(b, fi.Size()-int64(len(b)))
	lines := strings.Split(strings.TrimSpace(string(b[:n])), "\n")
	return ": " + lines[len(lines)-1]
}

// AutostartLock takes the auto-start lock of the socket folder dir,
// waiting for it. Auto-start holds it while it starts a daemon; a daemon
// started by hand takes it while it opens its sockets, so that a connect
// started at the same moment waits for that daemon instead of starting
// another.
func AutostartLock(ctx context.Context, dir string) (unlock func(), err error) {
	return lockFile(ctx, filepath.Join(dir, autostartLock))
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
