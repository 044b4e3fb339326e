package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

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
		executable: mcpmuxExecutable,
		goos:       runtime.GOOS,
		uid:        os.Getuid(),
		run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).CombinedOutput()
		},
	}
}

// mcpmuxExecutable returns the absolute path of the running mcpmux. When
// the mcpmux found in PATH is the same file, that path wins: it is the one
// that survives upgrades (/opt/homebrew/bin/mcpmux rather than the
// versioned file it links to).
func mcpmuxExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the mcpmux executable: %w", err)
	}
	if p, err := exec.LookPath("mcpmux"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			a, errA := os.Stat(abs)
			b, errB := os.Stat(exe)
			if errA == nil && errB == nil && os.SameFile(a, b) {
				return abs, nil
			}
		}
	}
	return exe, nil
}

// stableExecutable refuses an executable that will not be there tomorrow:
// one built by go run, in a temporary folder deleted when it exits.
func stableExecutable(exe string) error {
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return fmt.Errorf("%s is a temporary build (go run): install mcpmux (go install ./cmd/mcpmux) and run that one", exe)
	}
	return nil
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
