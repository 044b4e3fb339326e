package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
)

// newRootCmd builds the command tree afresh, so that tests can run it with
// SetArgs, SetOut and SetErr.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mcpmux",
		Short:         "Share one process per MCP server among many clients",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newConnectCmd(), newStatusCmd(), newTapCmd(), newRestartCmd(), newReloadCmd(), newLogsCmd(), newVersionCmd(), newImportCmd(), newClientConfigCmd(), newAdoptCmd(), newTokenCmd(), newServiceCmd(), newDoctorCmd())
	setVersionFlag(root)
	addCompletions(root)
	return root
}

// configFlag adds --config to a command and returns a function that resolves
// it: the flag, else $MCPMUX_CONFIG, else the XDG config folder.
func configFlag(cmd *cobra.Command) func() (*config.Config, error) {
	var path string
	cmd.Flags().StringVar(&path, "config", "", "config file (default: $MCPMUX_CONFIG, else $XDG_CONFIG_HOME/mcpmux/mux.toml)")
	return func() (*config.Config, error) {
		p := path
		if p == "" {
			var err error
			if p, err = config.DefaultPath(os.Getenv); err != nil {
				return nil, err
			}
		}
		cfg, err := config.Load(p)
		if err == nil && cfg.Listen.SocketDirNote != "" && cmd.Name() != "serve" {
			fmt.Fprintln(cmd.ErrOrStderr(), "mcpmux:", cfg.Listen.SocketDirNote)
		}
		return cfg, err
	}
}

// newLogger writes the daemon's log to w (stderr), never to stdout.
func newLogger(cfg *config.Config, w interface{ Write([]byte) (int, error) }) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Daemon.LogLevel}
	if cfg.Daemon.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
