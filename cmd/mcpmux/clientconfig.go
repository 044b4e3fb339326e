package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/editors"
)

func newClientConfigCmd() *cobra.Command {
	return newClientConfigCmdWith(hostSetupEnv())
}

func newClientConfigCmdWith(env setupEnv) *cobra.Command {
	var target string
	var overHTTP bool
	cmd := &cobra.Command{
		Use:   "client-config NAME --for " + editors.ForChoices(),
		Short: "Print the snippet that points an editor at a server through mcpmux",
		Long: `Prints what to put in an editor's MCP configuration so that it reaches the
server NAME through mcpmux: a command that runs "mcpmux connect NAME" (with
the absolute path of this mcpmux, and --config when the config is not in
its default place), or with --http the URL of the server on the daemon's web
listener ([listen] http) and its token.

` + editors.ForHelp(),
		Args: cobra.ExactArgs(1),
	}
	configPath := configPathFlag(cmd, env.getenv)
	cmd.Flags().StringVar(&target, "for", "", "the editor: "+editors.ForValues())
	cmd.Flags().BoolVar(&overHTTP, "http", false, "use the daemon's web listener ([listen] http) instead of mcpmux connect")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		client, err := editors.Lookup(target)
		if err != nil {
			return err
		}
		path, isDefault, err := configPath()
		if err != nil {
			return err
		}
		cfg, err := config.Load(path)
		if err != nil {
			return err
		}
		name := args[0]
		if err := configuredServer(cfg, name); err != nil {
			return err
		}
		if overHTTP {
			return printHTTPClientConfig(cmd, env, client, cfg, path, name)
		}
		exe, err := env.executable()
		if err != nil {
			return err
		}
		if err := stableExecutable(exe); err != nil {
			return err
		}
		connect := []string{exe, "connect"}
		if !isDefault {
			connect = append(connect, "--config", path)
		}
		return client.PrintStdio(cmd.OutOrStdout(), cmd.ErrOrStderr(), name, append(connect, name))
	}
	return cmd
}

// printHTTPClientConfig prints the entry that reaches server name on the
// web listener of the daemon of cfg, loaded from path.
func printHTTPClientConfig(cmd *cobra.Command, env setupEnv, client *editors.Client, cfg *config.Config, path, name string) error {
	if err := client.TakesHTTP(); err != nil {
		return err
	}
	if cfg.Listen.Web.Addr == "" {
		return fmt.Errorf("--http: the daemon has no web listener: set http = \"127.0.0.1:7878\" in [listen] of %s (and restart the daemon)", path)
	}
	url, err := editors.ServerURL(cfg.Listen.Web.Addr, name)
	if err != nil {
		return err
	}
	token, err := editors.Token(cfg.Listen.Web.Token, env.getenv)
	if err != nil {
		return err
	}
	return client.PrintHTTP(cmd.OutOrStdout(), cmd.ErrOrStderr(), name, url, token)
}

// configuredServer checks that cfg has a server called name.
func configuredServer(cfg *config.Config, name string) error {
	names := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		if s.Name() == name {
			return nil
		}
		names[i] = s.Name()
	}
	if len(names) == 0 {
		return fmt.Errorf("no server named %q: %s has no [servers.NAME] tables", name, cfg.Path)
	}
	return fmt.Errorf("no server named %q in %s; configured: %s", name, cfg.Path, strings.Join(names, ", "))
}
