package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/bridge"
	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
)

// target is the daemon a client command (connect, status, logs, restart)
// talks to: the one serving the config file, found through its record
// when it has one, else where the file says it serves.
type target struct {
	path string         // the config file
	cfg  *config.Config // nil when the file does not load now
	dir  string         // the socket folder
	rec  *daemon.Record // the record of a live daemon of this file; nil when none
	// servers and endpoints are the daemon's, when no file loads and the
	// user's daemon was found in the default socket folder (usersDaemon).
	servers, endpoints []string
}

// daemonFlag adds --config to a client command and returns a function
// that finds its daemon. Warnings (a config file that does not load while
// its daemon runs, an unusual socket folder) go to warn; nil discards them.
func daemonFlag(cmd *cobra.Command) func(ctx context.Context, warn io.Writer) (*target, error) {
	var path string
	cmd.Flags().StringVar(&path, "config", "", "config file (default: $MCPMUX_CONFIG, else $XDG_CONFIG_HOME/mcpmux/mux.toml)")
	return func(ctx context.Context, warn io.Writer) (*target, error) {
		p := path
		if p == "" {
			var err error
			if p, err = config.DefaultPath(os.Getenv); err != nil {
				return usersDaemon(ctx, err, warn)
			}
		}
		t, err := locate(ctx, p, warn)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return usersDaemon(ctx, err, warn)
		}
		return t, err
	}
}

// defaultSocketDir is where the user's daemon serves when no config says
// otherwise (a variable for the tests).
var defaultSocketDir = func() string {
	dir, _ := config.DefaultSocketDir(os.Getuid())
	return dir
}

// usersDaemon is the target of a client command whose config file cannot
// be read (cause says why): the daemon this user runs in the default
// socket folder, so that a client that strips the environment, or gives
// mcpmux a --config of its own, still reaches the servers. The servers are
// the daemon's. With no daemon there, cause is the error.
func usersDaemon(ctx context.Context, cause error, warn io.Writer) (*target, error) {
	if warn == nil {
		warn = io.Discard
	}
	dir := defaultSocketDir()
	if live, err := bridge.Answers(ctx, filepath.Join(dir, daemon.ControlSocket)); err != nil || !live {
		return nil, cause
	}
	st, err := daemon.NewClient(dir).Status(ctx)
	if err != nil {
		return nil, cause
	}
	fmt.Fprintf(warn, "mcpmux: warning: %v; using the daemon that serves in %s (pid %d, config %s)\n", cause, dir, st.Pid, st.Config)
	t := &target{path: st.Config, dir: dir, rec: &daemon.Record{Config: st.Config, SocketDir: dir, Pid: st.Pid, Version: st.Version}}
	for _, s := range st.Servers {
		t.servers = append(t.servers, s.Name)
	}
	for _, e := range st.Endpoints {
		t.endpoints = append(t.endpoints, e.Name)
	}
	return t, nil
}

// locate finds the daemon of the config file at path. The daemon's record
// comes first: the daemon serves where it started, whatever the file or
// this process's environment say now. A file that does not load is a
// warning while its daemon runs (it keeps the config it loaded, and
// `reload` refuses the file), and the error when none does.
func locate(ctx context.Context, path string, warn io.Writer) (*target, error) {
	if warn == nil {
		warn = io.Discard
	}
	cfg, cerr := config.Load(path)
	t := &target{path: path, cfg: cfg}
	rec, err := liveRecord(ctx, path)
	if err != nil {
		return nil, err
	}
	t.rec = rec
	switch {
	case cerr != nil && rec == nil:
		return nil, cerr
	case cerr != nil:
		warnConfig(warn, path, cerr, rec)
		t.dir = rec.SocketDir
		return t, nil
	case rec != nil:
		t.dir = rec.SocketDir
	default:
		t.dir = cfg.Listen.SocketDir
		if note := cfg.Listen.SocketDirNote; note != "" {
			fmt.Fprintln(warn, "mcpmux:", note)
		}
	}
	return t, nil
}

// liveRecord is the record of the daemon of the config file at path when
// that daemon answers on its control socket; nil when there is none. A
// socket folder or a listener that is not this user's is an error.
func liveRecord(ctx context.Context, path string) (*daemon.Record, error) {
	state, err := config.StateDir(os.Getenv)
	if err != nil {
		return nil, nil // no state folder: no records; the file says where
	}
	rec, ok := daemon.ReadRecord(state, path)
	if !ok {
		return nil, nil
	}
	live, err := bridge.Answers(ctx, filepath.Join(rec.SocketDir, daemon.ControlSocket))
	if err != nil || !live {
		return nil, err
	}
	return &rec, nil
}

// warnConfig says on w that the config file does not load, line by line
// (each problem names the file, its line and its key), and that its daemon
// goes on with the config it loaded.
func warnConfig(w io.Writer, path string, err error, rec *daemon.Record) {
	fmt.Fprintf(w, "mcpmux: warning: %s does not load; the daemon serving it (pid %d) goes on with the config it loaded: fix the file, then run `mcpmux reload`\n",
		path, rec.Pid)
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(w, "mcpmux: warning:", line)
	}
}

// bridgeTarget is t as `mcpmux connect` needs it: where the daemon
// serves, the servers the file has, and how to start a daemon for it.
func (t *target) bridgeTarget() *bridge.Target {
	bt := &bridge.Target{Path: t.path, Dir: t.dir}
	if t.cfg == nil {
		// The daemon's own list, when it is all there is: connect then
		// refuses an unknown name as with a file, and starts no daemon.
		bt.Loaded, bt.Servers, bt.Endpoints = t.servers != nil, t.servers, t.endpoints
		return bt
	}
	bt.Loaded, bt.Autostart = true, t.cfg.Daemon.Autostart
	for _, s := range t.cfg.Servers {
		bt.Servers = append(bt.Servers, s.Name())
	}
	for _, e := range t.cfg.Endpoints {
		bt.Endpoints = append(bt.Endpoints, e.Name)
	}
	if path := t.cfg.Path; path != "" {
		bt.Serve = func(log string) (*exec.Cmd, error) {
			exe, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("find the mcpmux executable: %w", err)
			}
			return exec.Command(exe, "serve", "--config", path, "--"+autostartedFlag, "--"+logFileFlag, log), nil
		}
	}
	return bt
}
