package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/editors"
)

// Shell completion. cobra's own `mcpmux completion bash|zsh|fish|powershell`
// prints the script; the shell then asks `mcpmux __complete ARGS...` for
// each completion. This file adds what cobra cannot know: the server names
// of the config (for connect, restart, logs and client-config) and the
// editors of client-config --for.

// serverNameCommands are the commands whose (first) argument is a server name.
var serverNameCommands = []string{"connect", "restart", "logs", "tap", "client-config"}

// addCompletions attaches the completions to root's commands, and makes
// `mcpmux completion SHELL` refuse a shell it has no script for (cobra's
// own prints its help and exits 0).
func addCompletions(root *cobra.Command) {
	root.InitDefaultCompletionCmd() // nothing when root.CompletionOptions.DisableDefaultCmd
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args, c.RunE = cobra.ArbitraryArgs, refuseShell
		}
	}
	for _, c := range root.Commands() {
		if slices.Contains(serverNameCommands, c.Name()) {
			c.ValidArgsFunction = completeServerNames
		}
		if c.Name() == "client-config" {
			c.RegisterFlagCompletionFunc("for", completeTargets) // the flag exists: no error
		}
	}
}

// completeServerNames offers the servers of the config named by --config
// (else the default one), each with its command as the description.
func completeServerNames(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	path, _ := cmd.Flags().GetString("config")
	if path == "" {
		var err error
		if path, err = config.DefaultPath(os.Getenv); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	}
	// A config that does not load for another reason (a wrong value, a
	// folder that is gone) still completes its names.
	o, _ := config.Skim(path)
	var out []cobra.Completion
	for _, s := range o.Servers {
		if strings.HasPrefix(s.Name, toComplete) {
			out = append(out, cobra.CompletionWithDesc(s.Name, strings.Join(s.Command, " ")))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeTargets offers the editors client-config knows.
func completeTargets(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	clients := slices.SortedFunc(slices.Values(editors.Clients), func(a, b *editors.Client) int { return strings.Compare(a.For, b.For) })
	var out []cobra.Completion
	for _, c := range clients {
		if strings.HasPrefix(c.For, toComplete) {
			out = append(out, cobra.CompletionWithDesc(c.For, c.Name))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// refuseShell runs for `mcpmux completion ARG` when ARG is none of the
// shells: with no argument it prints the help, else it names the shells.
func refuseShell(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	var shells []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			shells = append(shells, c.Name())
		}
	}
	return fmt.Errorf("no completion for the shell %q: mcpmux has scripts for %s", args[0], strings.Join(shells, ", "))
}
