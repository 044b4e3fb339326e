package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
)

// commands are mcpmux's commands, by name, in the order of its help.
var commands = []struct {
	name  string
	build func() *cobra.Command
}{
	{"serve", newServeCmd}, {"connect", newConnectCmd}, {"status", newStatusCmd}, {"tap", newTapCmd},
	{"restart", newRestartCmd}, {"reload", newReloadCmd}, {"logs", newLogsCmd}, {"version", newVersionCmd},
	{"import", newImportCmd}, {"client-config", newClientConfigCmd}, {"adopt", newAdoptCmd},
	{"token", newTokenCmd}, {"service", newServiceCmd}, {"doctor", newDoctorCmd},
}

// newRootCmd builds the whole command tree afresh, so that tests can run it
// with SetArgs, SetOut and SetErr.
func newRootCmd() *cobra.Command { return newRootFor(nil) }

// newRootFor builds the command tree that runs args. When args starts with
// a command's name, root holds that command alone: cobra then finds, parses
// and runs it as in the whole tree, and the other commands' flags and help
// texts, the editors' table and the completion command are not built for a
// process that will not use them (every editor spawns `mcpmux connect`, and
// waits for it). Anything else (no args, a flag, help, completion, a name
// that is no command) gets the whole tree, with its help and suggestions.
func newRootFor(args []string) *cobra.Command {
	root := &cobra.Command{
		Use:           "mcpmux",
		Short:         "Share one process per MCP server among many clients",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, c := range commands {
		if len(args) > 0 && args[0] == c.name {
			root.AddCommand(c.build())
			root.CompletionOptions.DisableDefaultCmd = true
		}
	}
	if !root.HasSubCommands() {
		for _, c := range commands {
			root.AddCommand(c.build())
		}
	}
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
