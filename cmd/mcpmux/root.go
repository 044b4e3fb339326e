package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time (-ldflags "-X main.version=..."); otherwise
// the module version from the build info is used.
var version = ""

func mcpmuxVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// newRootCmd builds the command tree afresh, so that tests can run it with
// SetArgs, SetOut and SetErr.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mcpmux",
		Short:         "Share one process per MCP server among many clients",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newConnectCmd(), newStatusCmd(), newRestartCmd(), newReloadCmd(), newLogsCmd(), newVersionCmd(), newImportCmd(), newClientConfigCmd(), newServiceCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "mcpmux", mcpmuxVersion())
			return err
		},
	}
}

// configFlag adds --config to a command and returns a function that resolves
// it: the flag, else $MCPMUX_CONFIG, else the XDG config folder.
func configFlag(cmd *cobra.Command) func() (*config, error) {
	var path string
	cmd.Flags().StringVar(&path, "config", "", "config file (default: $MCPMUX_CONFIG, else $XDG_CONFIG_HOME/mcpmux/mux.toml)")
	return func() (*config, error) {
		p := path
		if p == "" {
			var err error
			if p, err = defaultConfigPath(os.Getenv); err != nil {
				return nil, err
			}
		}
		cfg, err := loadConfig(p)
		if err == nil && cfg.Listen.SocketDirNote != "" && cmd.Name() != "serve" {
			fmt.Fprintln(cmd.ErrOrStderr(), "mcpmux:", cfg.Listen.SocketDirNote)
		}
		return cfg, err
	}
}

// newLogger writes the daemon's log to w (stderr), never to stdout.
func newLogger(cfg *config, w interface{ Write([]byte) (int, error) }) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Daemon.LogLevel}
	if cfg.Daemon.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
