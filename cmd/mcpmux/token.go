package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/internal/editors"
	"github.com/mcpmux/mcpmux/socket"
)

// newTokenCmd is `mcpmux token`, whose one subcommand replaces the web
// listener's generated token.
func newTokenCmd() *cobra.Command {
	return newTokenCmdWith(hostSetupEnv())
}

func newTokenCmdWith(env setupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token rotate",
		Short: "Manage the web listener's token",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newTokenRotateCmd(env))
	return cmd
}

func newTokenRotateCmd(env setupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Replace the web listener's generated token with a new one",
		Long: `Replaces the token the web listener's clients must present, kept in
$XDG_STATE_HOME/mcpmux/http.token (else ~/.local/state/mcpmux/http.token),
with a new random one, and says which daemon still takes the old one. A
token set by http_token in [listen] is the config file's: change it there.
The token is never printed: give clients the new one with
"mcpmux client-config NAME --for EDITOR --http".`,
		Args: cobra.NoArgs,
	}
	find := daemonFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		t, err := find(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if t.cfg != nil && t.cfg.Listen.Web.Token != "" {
			return fmt.Errorf("the token is http_token in [listen] of %s: change it there, then restart the daemon", t.path)
		}
		path, err := editors.TokenPath(env.getenv)
		if err != nil {
			return err
		}
		if _, err := socket.RotateToken(path); err != nil {
			return err
		}
		printRotated(cmd.OutOrStdout(), path, t)
		return nil
	}
	return cmd
}

// printRotated says where the new token is and what still takes the old
// one.
func printRotated(w io.Writer, path string, t *target) {
	fmt.Fprintf(w, "new token written to %s (mode 0600)\n", path)
	if t.rec != nil {
		fmt.Fprintf(w, "the daemon running since %s (pid %d) takes the new token at once, and the old one for another %s\n",
			t.rec.Started.Format(time.DateTime), t.rec.Pid, socket.DefaultTokenGrace)
	}
	fmt.Fprintln(w, `clients of the web listener need the new token: "mcpmux client-config NAME --for EDITOR --http" prints their config`)
}
