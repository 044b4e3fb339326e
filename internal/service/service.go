// Package service installs and removes the login service that runs
// "mcpmux serve": a systemd user unit on Linux, a launchd agent on macOS. It
// owns the files' content (the command, the PATH it runs with, restart on
// failure), where they go, and the systemctl and launchctl commands that
// start and stop the service, which it prints or, when asked, runs.
package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpmux/mcpmux/internal/shell"
)

// Env is what the service learns from the machine it is installed on.
// Tests replace it, so that they write under t.TempDir and never run
// systemctl or launchctl.
type Env struct {
	Getenv func(string) string
	GOOS   string
	UID    int
	// Run runs a command (systemctl, launchctl) and returns its output.
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
}

// The names the service is installed under.
const (
	systemdUnitName = "mcpmux.service"
	launchdLabel    = "dev.mcpmux"
)

// command is one command line Install or Uninstall runs (now) or prints.
type command struct {
	args    []string
	mayFail bool // a failure is reported, and the next command runs all the same
}

// Plan is where the service lives on this platform, and how it is
// started and stopped.
type Plan struct {
	env       Env
	path      string    // the systemd unit or the launchd plist
	links     []string  // symlinks uninstall also removes: systemd's enablement
	logDir    string    // a folder install creates for the log; "" if none
	install   []command // start it now and at every login
	reinstall []command // the same, when a changed file replaced one already loaded
	uninstall []command // stop it, once its file is gone
	logs      string    // how to read its log
}

// NewPlan finds where the service goes for env: a systemd user unit on
// Linux, a launchd agent on macOS.
func NewPlan(env Env) (*Plan, error) {
	p, err := planFor(env)
	if err != nil {
		return nil, err
	}
	p.env = env
	return &p, nil
}

// planFor is NewPlan's plan, for env's system.
func planFor(env Env) (Plan, error) {
	systemctl := func(args ...string) command {
		return command{args: append([]string{"systemctl", "--user"}, args...)}
	}
	switch env.GOOS {
	case "linux":
		dir, err := systemdUserDir(env.Getenv)
		if err != nil {
			return Plan{}, err
		}
		stop := systemctl("stop", "mcpmux")
		stop.mayFail = true // not loaded: nothing to stop
		return Plan{
			path:      filepath.Join(dir, systemdUnitName),
			links:     []string{filepath.Join(dir, "default.target.wants", systemdUnitName)},
			install:   []command{systemctl("daemon-reload"), systemctl("enable", "--now", "mcpmux")},
			reinstall: []command{systemctl("daemon-reload"), systemctl("enable", "mcpmux"), systemctl("restart", "mcpmux")},
			uninstall: []command{stop, systemctl("daemon-reload")},
			logs:      "journalctl --user -u mcpmux -f",
		}, nil
	case "darwin":
		home := env.Getenv("HOME")
		if !filepath.IsAbs(home) {
			return Plan{}, errors.New("HOME is not set to an absolute path: cannot find ~/Library/LaunchAgents")
		}
		domain := "gui/" + strconv.Itoa(env.UID)
		path := filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist")
		// bootstrap fails when the agent is loaded already; kickstart then
		// starts it if it is not running, and fails if it did not load.
		bootout := command{args: []string{"launchctl", "bootout", domain + "/" + launchdLabel}, mayFail: true}
		bootstrap := command{args: []string{"launchctl", "bootstrap", domain, path}, mayFail: true}
		kickstart := command{args: []string{"launchctl", "kickstart", domain + "/" + launchdLabel}}
		return Plan{
			path:      path,
			logDir:    filepath.Join(home, "Library", "Logs"),
			install:   []command{bootstrap, kickstart},
			reinstall: []command{bootout, bootstrap, kickstart},
			uninstall: []command{bootout},
			logs:      "tail -f " + shell.Quote(launchdLogPath(home)),
		}, nil
	}
	return Plan{}, fmt.Errorf("mcpmux service knows Linux (systemd) and macOS (launchd), not %s", env.GOOS)
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

// carried are the variables of the installing shell that the service gets:
// PATH, since servers' commands are looked up there (npx, uvx and docker
// are rarely in the service manager's own), and XDG_STATE_HOME, since the
// state folder is where the daemon records itself for connect and status.
var carried = []string{"PATH", "XDG_STATE_HOME"}

// variable is one NAME=value a service file sets.
type variable struct{ name, value string }

// Content is the unit or plist that runs "exe serve --config cfg", with
// the carried variables that the installing shell sets.
func Content(env Env, exe, cfg string) ([]byte, error) {
	var vars []variable
	for _, name := range carried {
		if v := env.Getenv(name); v != "" {
			vars = append(vars, variable{name, v})
		}
	}
	check := []string{exe, cfg}
	for _, v := range vars {
		check = append(check, v.value)
	}
	for _, s := range check {
		if strings.ContainsAny(s, "\x00\r\n") {
			return nil, fmt.Errorf("%q cannot be written in a service file: it holds a line break or NUL", s)
		}
	}
	var b bytes.Buffer
	switch env.GOOS {
	case "linux":
		systemdUnit(&b, exe, cfg, vars)
	case "darwin":
		launchdPlist(&b, exe, cfg, vars, launchdLogPath(env.Getenv("HOME")))
	default:
		return nil, fmt.Errorf("mcpmux service knows Linux (systemd) and macOS (launchd), not %s", env.GOOS)
	}
	return b.Bytes(), nil
}

// systemdUnit writes the systemd unit that runs "exe serve --config cfg"
// with the variables vars.
func systemdUnit(b *bytes.Buffer, exe, cfg string, vars []variable) {
	b.WriteString("# Written by \"mcpmux service install\"; \"mcpmux service uninstall\" removes it.\n")
	b.WriteString("[Unit]\nDescription=mcpmux: one shared process per MCP server\nDocumentation=https://github.com/mcpmux/mcpmux\n\n")
	b.WriteString("[Service]\n")
	fmt.Fprintf(b, "ExecStart=%s serve --config %s\n", systemdExecQuote(exe), systemdExecQuote(cfg))
	for _, v := range vars {
		fmt.Fprintf(b, "Environment=%s\n", systemdQuote(v.name+"="+v.value))
	}
	// mcpmux stops its servers itself, stdin first; systemd signals only
	// mcpmux, and kills what is left once the stop timeout passes.
	b.WriteString("KillMode=mixed\nRestart=on-failure\nRestartSec=2s\n\n")
	b.WriteString("[Install]\nWantedBy=default.target\n")
}

// launchdPlist writes the launchd agent that runs "exe serve --config cfg"
// with the variables vars, its output going to the file log.
func launchdPlist(b *bytes.Buffer, exe, cfg string, vars []variable, log string) {
	str := func(s string) string { return "<string>" + escapeXML(s) + "</string>" }
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
	if len(vars) > 0 {
		b.WriteString("\t<key>EnvironmentVariables</key>\n\t<dict>\n")
		for _, v := range vars {
			b.WriteString("\t\t<key>" + v.name + "</key>\n\t\t" + str(v.value) + "\n")
		}
		b.WriteString("\t</dict>\n")
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

// Install writes the service that runs "exe serve --config cfg", and says
// on out what it did: a file that is there already and the same is left as
// it is; one that differs is replaced only with force. With now, it also
// runs the commands that start the service and enable it at login;
// without, it prints them.
func (p *Plan) Install(ctx context.Context, out io.Writer, exe, cfg string, force, now bool) error {
	content, err := Content(p.env, exe, cfg)
	if err != nil {
		return err
	}
	commands := p.install
	old, err := os.ReadFile(p.path)
	switch {
	case err == nil && bytes.Equal(old, content):
		fmt.Fprintf(out, "%s is installed already, unchanged.\n", p.path)
	case err == nil && !force:
		return fmt.Errorf("%s exists and differs from the service this would write; --force replaces it", p.path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", p.path, err)
	default:
		if err == nil {
			commands = p.reinstall
		}
		if err := p.write(out, content, exe, cfg); err != nil {
			return err
		}
	}
	if now {
		if err := p.run(ctx, out, commands); err != nil {
			return err
		}
		fmt.Fprintf(out, "The service is running, and starts at every login. Its log: %s\n", p.logs)
		return nil
	}
	fmt.Fprintf(out, "To start it now and at every login, run:\n  %s\nIts log: %s\n", joinCommands(commands), p.logs)
	return nil
}

// write writes the service file, and the folder of its log.
func (p *Plan) write(out io.Writer, content []byte, exe, cfg string) error {
	if p.logDir != "" {
		if err := os.MkdirAll(p.logDir, 0o755); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(p.path, content, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "Wrote %s: it runs %s\n", p.path, shell.Join([]string{exe, "serve", "--config", cfg}))
	if path := p.env.Getenv("PATH"); path != "" {
		fmt.Fprintf(out, "Its servers' commands are looked up in this shell's PATH: %s\n"+
			"(after changing it, run mcpmux service install --force again).\n", path)
	}
	return nil
}

// Uninstall removes the service file, and the links that enable it at
// login. With now, it also runs the commands that stop the running
// service; without, it prints them.
func (p *Plan) Uninstall(ctx context.Context, out io.Writer, now bool) error {
	// The links first: removing them is what systemctl disable does, and
	// it cannot once the unit file is gone.
	for _, l := range p.links {
		if fi, err := os.Lstat(l); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if err := os.Remove(l); err != nil {
				return err
			}
			fmt.Fprintf(out, "Removed %s: the service no longer starts at login.\n", l)
		}
	}
	switch err := os.Remove(p.path); {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(out, "Not installed: there is no %s.\n", p.path)
		return nil
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "Removed %s.\n", p.path)
	if now {
		return p.run(ctx, out, p.uninstall)
	}
	fmt.Fprintf(out, "To stop the running daemon and disable the service, run:\n  %s\n", joinCommands(p.uninstall))
	return nil
}

// joinCommands writes commands as one shell line.
func joinCommands(commands []command) string {
	var b strings.Builder
	for i, c := range commands {
		if i > 0 {
			if commands[i-1].mayFail {
				b.WriteString("; ")
			} else {
				b.WriteString(" && ")
			}
		}
		b.WriteString(shell.Join(c.args))
	}
	return b.String()
}

// run runs commands in order, showing each and its output; it stops at
// the first that fails, unless that one may fail.
func (p *Plan) run(ctx context.Context, out io.Writer, commands []command) error {
	for _, c := range commands {
		line := shell.Join(c.args)
		fmt.Fprintf(out, "$ %s\n", line)
		output, err := p.env.Run(ctx, c.args[0], c.args[1:]...)
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

// escapeXML is s as XML character data, byte for byte what encoding/xml's
// EscapeText writes (a test holds them to it): the markup characters, tab,
// newline and carriage return as references, and a character XML does not
// allow, or a byte that is no UTF-8, as U+FFFD. Only the plist needs it,
// and encoding/xml would cost every mcpmux process its initialisation.
func escapeXML(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, width := utf8.DecodeRuneInString(s[i:])
		switch {
		case xmlReference(r) != "":
			b.WriteString(xmlReference(r))
		case !xmlChar(r) || r == utf8.RuneError && width == 1:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteString(s[i : i+width])
		}
		i += width
	}
	return b.String()
}

// xmlReference is the reference escapeXML writes for r, or "".
func xmlReference(r rune) string {
	switch r {
	case '"':
		return "&#34;"
	case '\'':
		return "&#39;"
	case '&':
		return "&amp;"
	case '<':
		return "&lt;"
	case '>':
		return "&gt;"
	case '\t':
		return "&#x9;"
	case '\n':
		return "&#xA;"
	case '\r':
		return "&#xD;"
	}
	return ""
}

// xmlChar reports whether XML allows r in character data.
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}
