package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/editors"
	"github.com/mcpmux/mcpmux/internal/service"
)

// `mcpmux adopt` moves the servers of the editors' files on this machine
// to mcpmux in one go (package editors works it out and writes it).

// adoptEnv is what adopt looks at: the machine and the folder it runs in
// (for the editors' project files).
type adoptEnv struct {
	setupEnv
	cwd string
}

func newAdoptCmd() *cobra.Command {
	env := adoptEnv{setupEnv: hostSetupEnv()}
	env.cwd, _ = os.Getwd()
	return newAdoptCmdWith(env)
}

func newAdoptCmdWith(env adoptEnv) *cobra.Command {
	var dryRun, undo bool
	cmd := &cobra.Command{
		Use:   "adopt [--dry-run] [--undo]",
		Short: "Move the MCP servers of every editor's config on this machine to mcpmux",
		Long: `Reads the editors' MCP config files where doctor looks (each editor's
user files, and the project files of this folder), adds their stdio servers
to mux.toml (an entry that runs the same command, args and env as a server
there, or as another entry, is that server; a project's file gives share =
"project"), and replaces the entries of each file by one, "mcpmux" (in a
project's file "mcpmux-PROJECT"), that runs "mcpmux connect": the endpoint
all, when the file ran every configured server and showed all their tools,
else an endpoint adopt adds to mux.toml with exactly the file's servers
(named after the editor: codex, cursor-PROJECT), whose allow_tools and
deny_tools keep the tools the editor showed (Codex's enabled_tools and
disabled_tools, Gemini's includeTools and excludeTools). The rest of each
file stays byte for byte. Each file is backed up beside itself first, as
FILE.mcpmux-backup; --undo puts every backup back, and removes a mux.toml
that adopt created (marked by mux.toml.mcpmux-created). Quit the editors
first: some (Claude Code) write their files while they run, and would
write the old entries back. Servers known to lose data when shared
(server-memory) get max_concurrency = 1, with a comment that says why.

When a daemon serves the config, adopt has it read the config again and
waits for each new server to be ready (up to 5 minutes, with progress), so
that first downloads (npx, uvx) happen now and not at an editor's first use.

Files it cannot read, and entries it does not understand (servers reached by
URL, keys it does not know, entries the editor has disabled), are left as
they are and listed. The editor's settings of an adopted entry that one
entry cannot keep (its timeouts) are listed as not carried. In Codex's
config.toml, the servers' [mcp_servers.NAME] tables become one (their
comments go); the rest of the file stays as it was.`,
		Args: cobra.NoArgs,
	}
	configPath := configPathFlag(cmd, env.getenv)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the changes as diffs and write nothing")
	cmd.Flags().BoolVar(&undo, "undo", false, "put back every file adopt rewrote, from its backup")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		path, isDefault, err := configPath()
		if err != nil {
			return err
		}
		if undo {
			return undoAdoption(cmd.OutOrStdout(), env, path)
		}
		return adopt(cmd.Context(), cmd.OutOrStdout(), env, path, isDefault, dryRun)
	}
	return cmd
}

// undoAdoption puts back every file adopt rewrote, from its backup.
func undoAdoption(out io.Writer, env adoptEnv, path string) error {
	restored, err := editors.Undo(editors.AdoptedFiles(env.getenv, env.goos, env.cwd, path))
	for _, p := range restored {
		fmt.Fprintf(out, "restored %s\n", p)
	}
	if err == nil && len(restored) == 0 {
		fmt.Fprintf(out, "no backups (FILE%s) to put back\n", editors.BackupSuffix)
	}
	return err
}

// adopt plans the adoption of the editors' servers into the config at
// path and says what it finds; then it writes it and warms the new servers
// up, or, with dryRun, prints the changes.
func adopt(ctx context.Context, out io.Writer, env adoptEnv, path string, isDefault, dryRun bool) error {
	in, err := adoptInput(env, path, isDefault)
	if err != nil {
		return err
	}
	plan, err := editors.PlanAdoption(in)
	if err != nil {
		return err
	}
	for _, l := range plan.Adopted {
		fmt.Fprintf(out, "through mcpmux: %s\n", l)
	}
	for _, l := range plan.NotCarried {
		fmt.Fprintf(out, "not carried: %s\n", l)
	}
	for _, l := range plan.Left {
		fmt.Fprintf(out, "left: %s\n", l)
	}
	for _, s := range plan.Added {
		fmt.Fprintf(out, "new server: %s\n", s.Name)
	}
	for _, e := range plan.Endpoints {
		fmt.Fprintf(out, "new endpoint: %s (%s)\n", e.Name, strings.Join(e.Servers, ", "))
	}
	if len(plan.Rewrites) == 0 {
		fmt.Fprintln(out, "nothing to adopt")
		return nil
	}
	if dryRun {
		for _, r := range plan.Rewrites {
			fmt.Fprint(out, "\n"+editors.Diff(r.Path, r.Old, r.New))
		}
		return nil
	}
	if err := plan.Apply(); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d files, each backed up beside itself (FILE%s); mcpmux adopt --undo puts them back\n",
		len(plan.Rewrites), editors.BackupSuffix)
	var names []string
	for _, s := range plan.Added {
		names = append(names, s.Name)
	}
	return warmUp(ctx, out, path, names, adoptWait)
}

// adoptWait is how long adopt waits for its new servers to be ready.
const adoptWait = 5 * time.Minute

// warmUp has the daemon of the config at path, if one runs, read it again
// and start the new servers names, and waits up to wait for each to be
// ready, saying how it goes, so that their first downloads happen now and
// not at an editor's first use.
func warmUp(ctx context.Context, out io.Writer, path string, names []string, wait time.Duration) error {
	if len(names) == 0 {
		return nil
	}
	var client *daemon.Client
	if t, err := locate(ctx, path, nil); err == nil {
		client = daemon.NewClient(t.dir)
	}
	if client == nil || func() error { _, err := client.Status(ctx); return err }() != nil {
		fmt.Fprintln(out, "no daemon serves this config: the new servers start with it (mcpmux serve, or an editor's first mcpmux connect)")
		return nil
	}
	if _, err := client.Reload(ctx); err != nil {
		return fmt.Errorf("adopt: the daemon did not read the config again: %w", err)
	}
	fmt.Fprintf(out, "starting in the daemon: %s\n", strings.Join(names, ", "))
	if err := client.AwaitReady(ctx, names, wait, out); err != nil {
		return fmt.Errorf("adopt: %w", err)
	}
	return nil
}

// adoptInput gathers what adoption needs: mux.toml's text and servers,
// and the command line that reaches a server through this mcpmux.
func adoptInput(env adoptEnv, path string, isDefault bool) (editors.AdoptInput, error) {
	in := editors.AdoptInput{Getenv: env.getenv, GOOS: env.goos, Cwd: env.cwd, Config: path}
	text, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return in, fmt.Errorf("adopt: %w", err)
	default:
		cfg, err := config.Load(path)
		if err != nil {
			return in, err
		}
		in.ConfigText = text
		for _, s := range cfg.Servers {
			u := s.Hub.Upstream
			in.Servers = append(in.Servers, editors.Server{Name: s.Name(), Command: u.Command, Args: u.Args, Env: u.Env, Cwd: u.Dir, Share: s.Share})
		}
	}
	exe, err := env.executable()
	if err != nil {
		return in, err
	}
	if err := service.Stable(exe); err != nil {
		return in, err
	}
	in.Connect = []string{exe, "connect"} // the endpoint all; adopt adds another's name
	if !isDefault {
		in.Connect = append(in.Connect, "--config", path)
	}
	return in, nil
}
