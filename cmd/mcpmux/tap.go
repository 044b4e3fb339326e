package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/daemon"
)

func newTapCmd() *cobra.Command {
	var q daemon.TapQuery
	cmd := &cobra.Command{
		Use:   "tap [NAME...]",
		Short: "Follow the messages of the named servers (or all) live, both ways, redacted unless --full",
	}
	find := daemonFlag(cmd)
	cmd.Flags().BoolVar(&q.JSON, "json", false, "print one JSON object a line")
	cmd.Flags().BoolVar(&q.Full, "full", false, "show whole messages (cut at 64 KiB) rather than their shape")
	cmd.Flags().Uint64Var(&q.Session, "session", 0, "only this session's messages")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		t, err := find(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		q.Servers = args
		body, err := daemon.NewClient(t.dir).Tap(cmd.Context(), q)
		if err != nil {
			return err
		}
		defer body.Close()
		fmt.Fprintf(cmd.ErrOrStderr(), "tapping %s; Ctrl-C stops\n", q)
		err = daemon.PrintTap(cmd.OutOrStdout(), body, q.JSON)
		if cmd.Context().Err() != nil {
			return nil // interrupted while following
		}
		return err
	}
	return cmd
}
