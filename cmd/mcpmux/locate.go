package main

import (
	"context"
	"fmt"
	"io"
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
				return nil, err
			}
		}
		return locate(ctx, p, warn)
	}
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
	state, err := stateDir(os.Getenv)
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
