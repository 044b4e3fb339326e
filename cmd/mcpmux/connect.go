package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/bridge"
	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/endpoint"
)

// defaultReconnect is how long connect tries to reach a daemon again after
// losing its session, unless --reconnect says otherwise.
const defaultReconnect = time.Minute

func newConnectCmd() *cobra.Command {
	var drain, reconnect time.Duration
	var viaYamux, noAutostart bool
	cmd := &cobra.Command{
		Use:   "connect [NAME]",
		Short: "Bridge stdin/stdout to the shared server or endpoint NAME (default: the endpoint all, every server)",
		Args:  cobra.MaximumNArgs(1),
	}
	find := daemonFlag(cmd)
	cmd.Flags().DurationVar(&drain, "drain", 5*time.Second, "after stdin closes, how long to wait for the answers still due")
	cmd.Flags().DurationVar(&reconnect, "reconnect", defaultReconnect, "after losing the daemon, how long to keep trying to reach one again (0: exit at once)")
	cmd.Flags().BoolVar(&viaYamux, "yamux", false, "speak yamux on the socket (first byte 0x00) and run the session on one stream")
	cmd.Flags().BoolVar(&noAutostart, "no-autostart", false, "do not start a daemon when none answers")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		name := endpoint.All
		if len(args) > 0 {
			name = args[0]
		}
		stdin, restore := pollableStdin(cmd.InOrStdin())
		defer restore()
		return bridge.Run(cmd.Context(), bridge.Config{
			Server: name,
			Find: func(ctx context.Context, warn io.Writer) (*bridge.Target, error) {
				t, err := find(ctx, warn)
				if err != nil {
					return nil, err
				}
				return t.bridgeTarget(), nil
			},
			Status: func(ctx context.Context, dir string) (daemon.Status, error) {
				return daemon.NewClient(dir).Status(ctx)
			},
			StateDir:    func() (string, error) { return config.StateDir(os.Getenv) },
			SameConfig:  daemon.SameConfig,
			NoAutostart: noAutostart,
			Yamux:       viaYamux,
			Drain:       drain,
			Reconnect:   reconnect,
			Stdin:       stdin,
			Stdout:      cmd.OutOrStdout(),
			Stderr:      cmd.ErrOrStderr(),
		})
	}
	return cmd
}
