package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/daemon"
)

func newStatusCmd() *cobra.Command {
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's servers: state, pid, uptime, restarts, sessions, last exit, last stderr lines",
		Args:  cobra.NoArgs,
	}
	find := daemonFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list each server's sessions too")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		t, err := find(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		st, err := daemon.NewClient(t.dir).Status(cmd.Context())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		if err := printStatus(out, st); err != nil || !verbose {
			return err
		}
		return printSessions(out, st)
	}
	return cmd
}

// protocolOf is a revision with its era, as status shows them.
func protocolOf(version, era string) string {
	if version == "" {
		return "-"
	}
	return version + " (" + era + ")"
}

// printSessions lists every server's sessions: who, over what, in which
// protocol, how long, with how much in flight.
func printSessions(w io.Writer, st daemon.Status) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSESSION\tTRANSPORT\tPEER\tCLIENT\tPROTOCOL\tAGE\tIN FLIGHT")
	for _, s := range st.Servers {
		for _, ss := range s.SessionList {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\n", s.Name, ss.ID, ss.Transport, dash(ss.Peer), dash(ss.Client), protocolOf(ss.Protocol, ss.Era), ss.Age, ss.Inflight)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range st.Servers {
		if s.Serialized {
			fmt.Fprintf(w, "\n%s: serialized as a whole: every interactive request takes turns\n", s.Name)
		}
		if len(s.Asks) > 0 {
			fmt.Fprintf(w, "\n%s: these requests cause the server's own, and take turns: %s\n", s.Name, strings.Join(s.Asks, ", "))
		}
	}
	return nil
}

// printShortages says which servers cannot start for want of the
// machine's resources, and why.
func printShortages(w io.Writer, st daemon.Status) {
	for _, s := range st.Servers {
		if s.Shortage != "" {
			fmt.Fprintf(w, "\n%s cannot start for want of the machine's resources (no crash: it is tried again with backoff): %s\n", s.Name, s.Shortage)
		}
	}
}

// printEndpoints lists the endpoints the daemon serves, if any.
func printEndpoints(w io.Writer, st daemon.Status) error {
	if len(st.Endpoints) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tSESSIONS\tSERVERS")
	for _, e := range st.Endpoints {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", e.Name, e.Sessions, strings.Join(e.Servers, ", "))
	}
	return tw.Flush()
}

func printStatus(w io.Writer, st daemon.Status) error {
	fmt.Fprintf(w, "mcpmux %s, pid %d, up %s, %d goroutines, %.1f MiB resident\n", st.Version, st.Pid, st.Uptime, st.Goroutines, float64(st.RSSBytes)/(1<<20))
	printConfigLine(w, st)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSTATE\tPID\tUPTIME\tPROTOCOL\tRESTARTS\tSESSIONS\tIN FLIGHT\tLAST EXIT")
	for _, s := range st.Servers {
		pid := "-"
		if s.Pid > 0 {
			pid = fmt.Sprint(s.Pid)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.Name, s.State, pid, dash(s.Uptime), protocolOf(s.Protocol, s.Era), s.Restarts, s.Sessions, s.Inflight, dash(s.LastExit))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printShortages(w, st)
	if err := printEndpoints(w, st); err != nil {
		return err
	}
	for _, s := range st.Servers {
		if len(s.Instances) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s runs one process per project:\n", s.Name)
		for _, in := range s.Instances {
			pid := "-"
			if in.Pid > 0 {
				pid = fmt.Sprint(in.Pid)
			}
			fmt.Fprintf(w, "  %s  %s  pid %s  %d sessions\n", in.Project, in.State, pid, in.Sessions)
		}
	}
	for _, s := range st.Servers {
		if len(s.Stderr) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s stderr (last %d lines):\n", s.Name, len(s.Stderr))
		for _, l := range s.Stderr {
			fmt.Fprintln(w, "  "+strings.TrimRight(l, "\r\n"))
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
		out := cmd.OutOrStdout()
		for _, l := range []struct {
			what  string
			names []string
		}{{"added", res.Added}, {"removed", res.Removed}, {"restarted", res.Restarted}, {"replaced", res.Replaced}, {"tool view changed", res.Retooled}} {
			if len(l.names) > 0 {
				fmt.Fprintf(out, "%s: %s\n", l.what, strings.Join(l.names, ", "))
			}
		}
		if len(res.Ignored) > 0 {
			fmt.Fprintf(out, "not applied until the daemon restarts: %s\n", strings.Join(res.Ignored, ", "))
		}
		if len(res.Added)+len(res.Removed)+len(res.Restarted)+len(res.Replaced)+len(res.Retooled) == 0 {
			fmt.Fprintln(out, "no server changed")
		}
		return nil
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
