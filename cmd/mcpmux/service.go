package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/service"
)

func newServiceCmd() *cobra.Command {
	return newServiceCmdWith(hostSetupEnv())
}

func newServiceCmdWith(env setupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Install or remove the daemon as a login service (systemd user unit, launchd agent)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newServiceInstallCmd(env), newServiceUninstallCmd(env))
	return cmd
}

func newServiceInstallCmd(env setupEnv) *cobra.Command {
	var force, now bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write a systemd user unit (Linux) or launchd agent (macOS) that runs mcpmux serve",
		Long: `Writes a service that runs "mcpmux serve --config FILE" at every login and
restarts it if it fails: ~/.config/systemd/user/mcpmux.service on Linux,
~/Library/LaunchAgents/dev.mcpmux.plist on macOS. It runs this mcpmux, with
the config file in use and the PATH of this shell. It prints the command
that starts the service; --now runs it.`,
		Args: cobra.NoArgs,
	}
	configPath := configPathFlag(cmd, env.getenv)
	cmd.Flags().BoolVar(&force, "force", false, "replace a service file that differs")
	cmd.Flags().BoolVar(&now, "now", false, "also start the service (systemctl or launchctl) and enable it at login")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		plan, err := service.NewPlan(env.service())
		if err != nil {
			return err
		}
		cfg, _, err := configPath()
		if err != nil {
			return err
		}
		if _, err := config.Load(cfg); err != nil {
			return fmt.Errorf("the service would not start: %w", err)
		}
		exe, err := env.executable()
		if err != nil {
			return err
		}
		if err := service.Stable(exe); err != nil {
			return err
		}
		return plan.Install(cmd.Context(), cmd.OutOrStdout(), exe, cfg, force, now)
	}
	return cmd
}

func newServiceUninstallCmd(env setupEnv) *cobra.Command {
	var now bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the service file that mcpmux service install wrote",
		Long: `Removes the service file, so that the daemon no longer starts at login, and
prints the command that stops the running one; --now runs it.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&now, "now", false, "also stop the running service (systemctl or launchctl)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		plan, err := service.NewPlan(env.service())
		if err != nil {
			return err
		}
		return plan.Uninstall(cmd.Context(), cmd.OutOrStdout(), now)
	}
	return cmd
}
