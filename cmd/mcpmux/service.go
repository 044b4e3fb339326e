package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
)

// The names the service is installed under.
const (
	systemdUnitName = "mcpmux.service"
	launchdLabel    = "dev.mcpmux"
)

// serviceCommand is one command line install or uninstall runs (--now) or
// prints.
type serviceCommand struct {
	args    []string
	mayFail bool // a failure is reported, and the next command runs all the same
}

// servicePlan is where the service lives on this platform, and how it is
// started and stopped.
type servicePlan struct {
	path      string           // the systemd unit or the launchd plist
	links     []string         // symlinks uninstall also removes: systemd's enablement
	logDir    string           // a folder install creates for the log; "" if none
	install   []serviceCommand // start it now and at every login
	reinstall []serviceCommand // the same, when a changed file replaced one already loaded
	uninstall []serviceCommand // stop it, once its file is gone
	logs      string           // how to read its log
}

// planService finds where the service goes for env: a systemd user unit on
// Linux, a launchd agent on macOS.
func planService(env setupEnv) (servicePlan, error) {
	systemctl := func(args ...string) serviceCommand {
		return serviceCommand{args: append([]string{"systemctl", "--user"}, args...)}
	}
	switch env.goos {
	case "linux":
		dir, err := systemdUserDir(env.getenv)
		if err != nil {
			return servicePlan{}, err
		}
		stop := systemctl("stop", "mcpmux")
		stop.mayFail = true // not loaded: nothing to stop
		return servicePlan{
			path:      filepath.Join(dir, systemdUnitName),
			links:     []string{filepath.Join(dir, "default.target.wants", systemdUnitName)},
			install:   []serviceCommand{systemctl("daemon-reload"), systemctl("enable", "--now", "mcpmux")},
			reinstall: []serviceCommand{systemctl("daemon-reload"), systemctl("enable", "mcpmux"), systemctl("restart", "mcpmux")},
			uninstall: []serviceCommand{stop, systemctl("daemon-reload")},
			logs:      "journalctl --user -u mcpmux -f",
		}, nil
	case "darwin":
		home := env.getenv("HOME")
		if !filepath.IsAbs(home) {
			return servicePlan{}, errors.New("HOME is not set to an absolute path: cannot find ~/Library/LaunchAgents")
		}
		domain := "gui/" + strconv.Itoa(env.uid)
		path := filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist")
		// bootstrap fails when the agent is loaded already; kickstart then
		// starts it if it is not running, and fails if it did not load.
		bootout := serviceCommand{args: []string{"launchctl", "bootout", domain + "/" + launchdLabel}, mayFail: true}
		bootstrap := serviceCommand{args: []string{"launchctl", "bootstrap", domain, path}, mayFail: true}
		kickstart := serviceCommand{args: []string{"launchctl", "kickstart", domain + "/" + launchdLabel}}
		return servicePlan{
			path:      path,
			logDir:    filepath.Join(home, "Library", "Logs"),
			install:   []serviceCommand{bootstrap, kickstart},
			reinstall: []serviceCommand{bootout, bootstrap, kickstart},
			uninstall: []serviceCommand{bootout},
			logs:      "tail -f " + shellQuoteArg(launchdLogPath(home)),
		}, nil
	}
	return servicePlan{}, fmt.Errorf("mcpmux service knows Linux (systemd) and macOS (launchd), not %s", env.goos)
}

// systemdUserDir is where systemd looks for a user's own units:
// $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user.
func systemdUserDir(getenv func(string) string) (string, error) {
	if dir := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "systemd", "user"), nil
	}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".config", "systemd", "user"), nil
	}
	return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set to an absolute path: cannot find the systemd user folder")
}

// launchdLogPath is the file the launchd agent sends the daemon's output to.
func launchdLogPath(home string) string {
	return filepath.Join(home, "Library", "Logs", "mcpmux.log")
}

// serviceContent is the unit or plist that runs "exe serve --config cfg",
// with the PATH of the installing shell (servers' commands are looked up
// there: npx, uvx and docker are rarely in the service manager's own PATH).
func serviceContent(env setupEnv, exe, cfg string) ([]byte, error) {
	path := env.getenv("PATH")
	for _, s := range []string{exe, cfg, path} {
		if strings.ContainsAny(s, "\x00\r\n") {
			return nil, fmt.Errorf("%q cannot be written in a service file: it holds a line break or NUL", s)
		}
	}
	var b bytes.Buffer
	switch env.goos {
	case "linux":
		b.WriteString("# Written by \"mcpmux service install\"; \"mcpmux service uninstall\" removes it.\n")
		b.WriteString("[Unit]\nDescription=mcpmux: one shared process per MCP server\nDocumentation=https://github.com/mcpmux/mcpmux\n\n")
		b.WriteString("[Service]\n")
		fmt.Fprintf(&b, "ExecStart=%s serve --config %s\n", systemdExecQuote(exe), systemdExecQuote(cfg))
		if path != "" {
			fmt.Fprintf(&b, "Environment=%s\n", systemdQuote("PATH="+path))
		}
		// mcpmux stops its servers itself, stdin first; systemd signals only
		// mcpmux, and kills what is left once the stop timeout passes.
		b.WriteString("KillMode=mixed\nRestart=on-failure\nRestartSec=2s\n\n")
		b.WriteString("[Install]\nWantedBy=default.target\n")
	case "darwin":
		str := func(s string) string {
			var e bytes.Buffer
			xml.EscapeText(&e, []byte(s))
			return "<string>" + e.String() + "</string>"
		}
		log := launchdLogPath(env.getenv("HOME"))
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by "mcpmux service install"; "mcpmux service uninstall" removes it. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	` + str(launchdLabel) + `
	<key>ProgramArguments</key>
	<array>
		` + str(exe) + `
		` + str("serve") + `
		` + str("--config") + `
		` + str(cfg) + `
	</array>
`)
		if path != "" {
			b.WriteString("\t<key>EnvironmentVariables</key>\n\t<dict>\n\t\t<key>PATH</key>\n\t\t" + str(path) + "\n\t</dict>\n")
		}
		b.WriteString(`	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>StandardOutPath</key>
	` + str(log) + `
	<key>StandardErrorPath</key>
	` + str(log) + `
</dict>
</plist>
`)
	default:
		return nil, fmt.Errorf("mcpmux service knows Linux (systemd) and macOS (launchd), not %s", env.goos)
	}
	return b.Bytes(), nil
}

// systemdQuote writes s as one word of a unit file setting: in double
// quotes when it needs them, with '%' (specifiers) doubled.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// systemdExecQuote is systemdQuote for ExecStart=, where '$' is also special.
func systemdExecQuote(s string) string {
	return systemdQuote(strings.ReplaceAll(s, "$", "$$"))
}

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
		plan, err := planService(env)
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
		if err := stableExecutable(exe); err != nil {
			return err
		}
		content, err := serviceContent(env, exe, cfg)
		if err != nil {
			return err
		}

		out := cmd.OutOrStdout()
		commands := plan.install
		old, err := os.ReadFile(plan.path)
		switch {
		case err == nil && bytes.Equal(old, content):
			fmt.Fprintf(out, "%s is installed already, unchanged.\n", plan.path)
		case err == nil && !force:
			return fmt.Errorf("%s exists and differs from the service this would write; --force replaces it", plan.path)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("read %s: %w", plan.path, err)
		default:
			if err == nil {
				commands = plan.reinstall
			}
			if plan.logDir != "" {
				if err := os.MkdirAll(plan.logDir, 0o755); err != nil {
					return err
				}
			}
			if err := writeFileAtomic(plan.path, content, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(out, "Wrote %s: it runs %s\n", plan.path, shellJoin([]string{exe, "serve", "--config", cfg}))
			if p := env.getenv("PATH"); p != "" {
				fmt.Fprintf(out, "Its servers' commands are looked up in this shell's PATH: %s\n"+
					"(after changing it, run mcpmux service install --force again).\n", p)
			}
		}
		if now {
			if err := runServiceCommands(cmd, env, commands); err != nil {
				return err
			}
			fmt.Fprintf(out, "The service is running, and starts at every login. Its log: %s\n", plan.logs)
			return nil
		}
		fmt.Fprintf(out, "To start it now and at every login, run:\n  %s\nIts log: %s\n", joinServiceCommands(commands), plan.logs)
		return nil
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
		plan, err := planService(env)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		// The links first: removing them is what systemctl disable does, and
		// it cannot once the unit file is gone.
		for _, l := range plan.links {
			if fi, err := os.Lstat(l); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				if err := os.Remove(l); err != nil {
					return err
				}
				fmt.Fprintf(out, "Removed %s: the service no longer starts at login.\n", l)
			}
		}
		switch err := os.Remove(plan.path); {
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(out, "Not installed: there is no %s.\n", plan.path)
			return nil
		case err != nil:
			return err
		}
		fmt.Fprintf(out, "Removed %s.\n", plan.path)
		if now {
			return runServiceCommands(cmd, env, plan.uninstall)
		}
		fmt.Fprintf(out, "To stop the running daemon and disable the service, run:\n  %s\n", joinServiceCommands(plan.uninstall))
		return nil
	}
	return cmd
}

// joinServiceCommands writes commands as one shell line.
func joinServiceCommands(commands []serviceCommand) string {
	var b strings.Builder
	for i, c := range commands {
		if i > 0 {
			if commands[i-1].mayFail {
				b.WriteString("; ")
			} else {
				b.WriteString(" && ")
			}
		}
		b.WriteString(shellJoin(c.args))
	}
	return b.String()
}

// runServiceCommands runs commands in order, showing each and its output;
// it stops at the first that fails, unless that one may fail.
func runServiceCommands(cmd *cobra.Command, env setupEnv, commands []serviceCommand) error {
	out := cmd.OutOrStdout()
	for _, c := range commands {
		line := shellJoin(c.args)
		fmt.Fprintf(out, "$ %s\n", line)
		output, err := env.run(cmd.Context(), c.args[0], c.args[1:]...)
		writeIndented(out, output)
		if err != nil && !c.mayFail {
			return fmt.Errorf("%s: %w", line, err)
		}
	}
	return nil
}

// writeIndented writes a command's output, each line indented.
func writeIndented(w io.Writer, output []byte) {
	for l := range strings.Lines(string(output)) {
		fmt.Fprintf(w, "  %s", l)
		if !strings.HasSuffix(l, "\n") {
			fmt.Fprintln(w)
		}
	}
}

// writeFileAtomic writes data to path through a temporary file in the same
// folder, creating the folder, so that a reader never sees half a file.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing left to remove
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
