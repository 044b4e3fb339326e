package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/endpoint"
	"github.com/mcpmux/mcpmux/internal/editors"
	"github.com/mcpmux/mcpmux/internal/service"
)

func newClientConfigCmd() *cobra.Command {
	return newClientConfigCmdWith(hostSetupEnv())
}

func newClientConfigCmdWith(env setupEnv) *cobra.Command {
	var target string
	var overHTTP bool
	cmd := &cobra.Command{
		Use:   "client-config [NAME] --for " + editors.ForChoices(),
		Short: "Print the snippet that points an editor at a server through mcpmux",
		Long: `Prints what to put in an editor's MCP configuration so that it reaches the
server or endpoint NAME through mcpmux: a command that runs "mcpmux connect
NAME" (with the absolute path of this mcpmux, and --config when the config
is not in its default place), or with --http the URL of the server on the
daemon's web listener ([listen] http) and its token. Without NAME, the one
entry "mcpmux" that reaches every server (the endpoint all).

` + editors.ForHelp(),
		Args: cobra.MaximumNArgs(1),
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
		// Without a name: the endpoint all, under one entry named mcpmux.
		name, entry := endpoint.All, "mcpmux"
		if len(args) > 0 {
			name, entry = args[0], args[0]
		}
		if err := configuredServer(cfg, name); err != nil {
			return err
		}
		if overHTTP {
			return printHTTPClientConfig(cmd, env, client, cfg, path, entry, name)
		}
		connect, err := connectLine(env, path, isDefault, args)
		if err != nil {
			return err
		}
		return client.PrintStdio(cmd.OutOrStdout(), cmd.ErrOrStderr(), entry, connect)
	}
	return cmd
}

// connectLine is the command line an editor runs to reach the server or
// endpoint named in args (none: the endpoint all) through this mcpmux.
func connectLine(env setupEnv, path string, isDefault bool, args []string) ([]string, error) {
	exe, err := env.executable()
	if err != nil {
		return nil, err
	}
	if err := service.Stable(exe); err != nil {
		return nil, err
	}
	connect := []string{exe, "connect"}
	if !isDefault {
		connect = append(connect, "--config", path)
	}
	return append(connect, args...), nil
}

// printHTTPClientConfig prints the entry that reaches server (or
// endpoint) name on the web listener of the daemon of cfg, loaded from
// path.
func printHTTPClientConfig(cmd *cobra.Command, env setupEnv, client *editors.Client, cfg *config.Config, path, entry, name string) error {
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
	return client.PrintHTTP(cmd.OutOrStdout(), cmd.ErrOrStderr(), entry, url, token)
}

// configuredServer checks that cfg has a server, or an endpoint, called
// name.
func configuredServer(cfg *config.Config, name string) error {
	if cfg.Endpoint(name) != nil {
		return nil
	}
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
