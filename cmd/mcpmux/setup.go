package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/service"
)

// setupEnv is what client-config and service learn from the machine they
// run on. Tests replace it, so that they write under t.TempDir and never
// run systemctl or launchctl.
type setupEnv struct {
	getenv     func(string) string
	executable func() (string, error) // the absolute path of this mcpmux
	goos       string
	uid        int
	// run runs a command (systemctl, launchctl) and returns its output.
	run func(ctx context.Context, name string, args ...string) ([]byte, error)
}

// service is the part of env that the service package uses.
func (env setupEnv) service() service.Env {
	return service.Env{Getenv: env.getenv, GOOS: env.goos, UID: env.uid, Run: env.run}
}

// hostSetupEnv is the setupEnv of the running process.
func hostSetupEnv() setupEnv {
	return setupEnv{
		getenv:     os.Getenv,
		executable: service.Executable,
		goos:       runtime.GOOS,
		uid:        os.Getuid(),
		run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).CombinedOutput()
		},
	}
}

// configPathFlag adds --config the way configFlag does and returns a
// function that resolves it the same way (the flag, else $MCPMUX_CONFIG,
// else the XDG config folder) to an absolute path. isDefault reports that
// the file is where mcpmux looks when neither --config nor MCPMUX_CONFIG is
// given, so that a command started by an editor finds it with no flag.
func configPathFlag(cmd *cobra.Command, getenv func(string) string) func() (path string, isDefault bool, err error) {
	var flag string
	cmd.Flags().StringVar(&flag, "config", "", "config file (default: $MCPMUX_CONFIG, else $XDG_CONFIG_HOME/mcpmux/mux.toml)")
	return func() (string, bool, error) {
		p := flag
		if p == "" {
			var err error
			if p, err = config.DefaultPath(getenv); err != nil {
				return "", false, err
			}
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", false, fmt.Errorf("config %s: %w", p, err)
		}
		def, err := config.DefaultPath(func(k string) string {
			if k == "MCPMUX_CONFIG" {
				return ""
			}
			return getenv(k)
		})
		return abs, err == nil && filepath.Clean(def) == abs, nil
	}
}
