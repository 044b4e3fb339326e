package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/statusview"
)

func newStatusCmd() *cobra.Command {
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show the daemon's servers, a line each; with NAME, that server in full (sessions, last stderr lines)",
		Args:  cobra.MaximumNArgs(1),
	}
	find := daemonFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list each server's sessions too")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		t, err := find(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		st, err := daemon.NewClient(t.dir).Status(cmd.Context())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		switch {
		case asJSON:
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		case len(args) == 1:
			return statusview.Server(out, st, args[0])
		}
		width := 0
		if f, ok := out.(*os.File); ok {
			width = statusview.Width(f)
		}
		if err := statusview.Table(out, st, width); err != nil || !verbose {
			return err
		}
		return statusview.Sessions(out, st)
	}
	return cmd
}

func newLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Show a server's recent stderr lines and mcpmux's events for it (-f follows)",
		Args:  cobra.ExactArgs(1),
	}
	find := daemonFlag(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		t, err := find(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		logs, err := daemon.NewClient(t.dir).Logs(cmd.Context(), args[0], follow)
		if err != nil {
			return err
		}
		defer logs.Close()
		_, err = io.Copy(cmd.OutOrStdout(), logs)
		if cmd.Context().Err() != nil {
			return nil // interrupted while following
		}
		return err
	}
	return cmd
}

func newReloadCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make the daemon read its config again (as SIGHUP does) and say what changed",
		Args:  cobra.NoArgs,
	}
	load := configFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := load()
		if err != nil {
			return err
		}
		res, err := daemon.NewClient(cfg.Listen.SocketDir).Reload(cmd.Context())
		if err != nil {
			return err
		}
		_, err = io.WriteString(cmd.OutOrStdout(), res.Summary())
		return err
	}
	return cmd
}

func newRestartCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restart NAME",
		Short: "Restart a server (sessions stay attached), or bring back a failed one",
		Args:  cobra.ExactArgs(1),
	}
	find := daemonFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		t, err := find(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if err := daemon.NewClient(t.dir).Restart(cmd.Context(), args[0]); err != nil {
			return err
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "restarting %s\n", args[0])
		return err
	}
	return cmd
}
