package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
)

// setupEnv is what client-config and service learn from the machine they
// run on. Tests replace it, so that they write under t.TempDir and never
// run systemctl or launchctl.
type setupEnv struct {
	getenv     func(string) string
	executable func() (string, error) // the absolute path of this mcpmux
	goos       string
	uid        int
	// run runs a command (systemctl, launchctl) and returns its output.
	run func(ctx context.Context, name string, args ...string) ([]byte, error)
}

// hostSetupEnv is the setupEnv of the running process.
func hostSetupEnv() setupEnv {
	return setupEnv{
		getenv:     os.Getenv,
		executable: mcpmuxExecutable,
		goos:       runtime.GOOS,
		uid:        os.Getuid(),
		run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).CombinedOutput()
		},
	}
}

// mcpmuxExecutable returns the absolute path of the running mcpmux. When
// the mcpmux found in PATH is the same file, that path wins: it is the one
// that survives upgrades (/opt/homebrew/bin/mcpmux rather than the
// versioned file it links to).
func mcpmuxExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the mcpmux executable: %w", err)
	}
	if p, err := exec.LookPath("mcpmux"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			a, errA := os.Stat(abs)
			b, errB := os.Stat(exe)
			if errA == nil && errB == nil && os.SameFile(a, b) {
				return abs, nil
			}
		}
	}
	return exe, nil
}

// stableExecutable refuses an executable that will not be there tomorrow:
// one built by go run, in a temporary folder deleted when it exits.
func stableExecutable(exe string) error {
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return fmt.Errorf("%s is a temporary build (go run): install mcpmux (go install ./cmd/mcpmux) and run that one", exe)
	}
	return nil
}

// configPathFlag adds --config the way configFlag does and returns a
// function that resolves it the same way (the flag, else $MCPMUX_CONFIG,
// else the XDG config folder) to an absolute path. isDefault reports that
// the file is where mcpmux looks when neither --config nor MCPMUX_CONFIG is
// given, so that a command started by an editor finds it with no flag.
func configPathFlag(cmd *cobra.Command, getenv func(string) string) func() (path string, isDefault bool, err error) {
	var flag string
	cmd.Flags().StringVar(&flag, "config", "", "config file (default: $MCPMUX_CONFIG, else $XDG_CONFIG_HOME/mcpmux/mux.toml)")
	return func() (string, bool, error) {
		p := flag
		if p == "" {
			var err error
			if p, err = config.DefaultPath(getenv); err != nil {
				return "", false, err
			}
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", false, fmt.Errorf("config %s: %w", p, err)
		}
		def, err := config.DefaultPath(func(k string) string {
			if k == "MCPMUX_CONFIG" {
				return ""
			}
			return getenv(k)
		})
		return abs, err == nil && filepath.Clean(def) == abs, nil
	}
}

// clientTargets are the values of client-config --for, with where their
// snippet goes.
var clientTargets = map[string]string{
	"claude":         "Claude Code",
	"claude-desktop": `claude_desktop_config.json (Claude Desktop: Settings > Developer > Edit Config), merged into "mcpServers"`,
	"cursor":         `~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into "mcpServers"`,
	"vscode":         `.vscode/mcp.json (one workspace) or the user mcp.json (command "MCP: Open User Configuration"), merged into "servers"`,
}

func newClientConfigCmd() *cobra.Command {
	return newClientConfigCmdWith(hostSetupEnv())
}

func newClientConfigCmdWith(env setupEnv) *cobra.Command {
	var target string
	var overHTTP bool
	cmd := &cobra.Command{
		Use:   "client-config NAME --for claude|claude-desktop|cursor|vscode",
		Short: "Print the snippet that points an editor at a server through mcpmux",
		Long: `Prints what to put in an editor's MCP configuration so that it reaches the
server NAME through mcpmux: a command that runs "mcpmux connect NAME" (with
the absolute path of this mcpmux, and --config when the config is not in
its default place), or with --http the URL of the server on the daemon's web
listener ([listen] http) and its token.

  --for claude          Claude Code: a "claude mcp add" command line, or .mcp.json
                        (with --http, .mcp.json only: no command line carries the token)
  --for claude-desktop  Claude Desktop's claude_desktop_config.json
  --for cursor          Cursor's mcp.json
  --for vscode          VS Code's mcp.json`,
		Args: cobra.ExactArgs(1),
	}
	configPath := configPathFlag(cmd, env.getenv)
	cmd.Flags().StringVar(&target, "for", "", "the editor: claude, claude-desktop, cursor or vscode")
	cmd.Flags().BoolVar(&overHTTP, "http", false, "use the daemon's web listener ([listen] http) instead of mcpmux connect")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if target == "claude-code" {
			target = "claude"
		}
		if target == "" {
			return errors.New("missing --for: claude (Claude Code), claude-desktop, cursor or vscode")
		}
		if _, ok := clientTargets[target]; !ok {
			return fmt.Errorf("--for %q: want claude (Claude Code), claude-desktop, cursor or vscode", target)
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
		out, hint := cmd.OutOrStdout(), cmd.ErrOrStderr()
		if overHTTP {
			if target == "claude-desktop" {
				return errors.New("--http: Claude Desktop's config file takes commands only; leave out --http (mcpmux connect reaches the same server)")
			}
			if cfg.Listen.HTTP == "" {
				return fmt.Errorf("--http: the daemon has no web listener: set http = \"127.0.0.1:7878\" in [listen] of %s (and restart the daemon)", path)
			}
			url, err := serverURL(cfg.Listen.HTTP, name)
			if err != nil {
				return err
			}
			token, err := clientToken(cfg.Listen, env.getenv)
			if err != nil {
				return err
			}
			fmt.Fprintln(hint, "# this holds the daemon's token: keep the file it goes in private")
			return printHTTPClientConfig(out, hint, target, name, url, token)
		}
		exe, err := env.executable()
		if err != nil {
			return err
		}
		if err := stableExecutable(exe); err != nil {
			return err
		}
		connect := []string{"connect"}
		if !isDefault {
			connect = append(connect, "--config", path)
		}
		connect = append(connect, name)
		return printStdioClientConfig(out, hint, target, name, exe, connect)
	}
	return cmd
}

// configuredServer checks that cfg has a server called name.
func configuredServer(cfg *config.Config, name string) error {
	names := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		if s.Name == name {
			return nil
		}
		names[i] = s.Name
	}
	if len(names) == 0 {
		return fmt.Errorf("no server named %q: %s has no [servers.NAME] tables", name, cfg.Path)
	}
	return fmt.Errorf("no server named %q in %s; configured: %s", name, cfg.Path, strings.Join(names, ", "))
}

// stdioClientEntry is a server entry that runs a command.
type stdioClientEntry struct {
	Type    string   `json:"type,omitempty"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// httpClientEntry is a server entry reached by URL.
type httpClientEntry struct {
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// printStdioClientConfig writes the snippet that runs exe with args for
// target to out, and where it goes to hint.
func printStdioClientConfig(out, hint io.Writer, target, name, exe string, args []string) error {
	switch target {
	case "claude":
		line := append([]string{"claude", "mcp", "add", name, "--", exe}, args...)
		fmt.Fprintln(out, "# Claude Code: run this (add --scope user to have it in every project)")
		fmt.Fprintln(out, shellJoin(line))
		fmt.Fprintln(out, "\n# or put this in the project's .mcp.json:")
		return printClientJSON(out, map[string]any{"mcpServers": map[string]any{name: stdioClientEntry{Command: exe, Args: args}}})
	case "vscode":
		fmt.Fprintln(hint, "# put this in "+clientTargets[target])
		return printClientJSON(out, map[string]any{"servers": map[string]any{name: stdioClientEntry{Type: "stdio", Command: exe, Args: args}}})
	default: // cursor, claude-desktop
		fmt.Fprintln(hint, "# put this in "+clientTargets[target])
		return printClientJSON(out, map[string]any{"mcpServers": map[string]any{name: stdioClientEntry{Command: exe, Args: args}}})
	}
}

// printHTTPClientConfig writes the snippet that reaches url with token for
// target to out, and where it goes to hint.
func printHTTPClientConfig(out, hint io.Writer, target, name, url, token string) error {
	headers := map[string]string{"Authorization": "Bearer " + token}
	switch target {
	case "claude":
		// No `claude mcp add --header` line: a token on a command line is
		// in every user's `ps` and in the shell's history.
		fmt.Fprintln(hint, "# put this in the project's .mcp.json, merged into \"mcpServers\" (a command line would show the token to every user)")
		return printClientJSON(out, map[string]any{"mcpServers": map[string]any{name: httpClientEntry{Type: "http", URL: url, Headers: headers}}})
	case "vscode":
		fmt.Fprintln(hint, "# put this in "+clientTargets[target])
		return printClientJSON(out, map[string]any{"servers": map[string]any{name: httpClientEntry{Type: "http", URL: url, Headers: headers}}})
	default: // cursor
		fmt.Fprintln(hint, "# put this in "+clientTargets[target])
		return printClientJSON(out, map[string]any{"mcpServers": map[string]any{name: httpClientEntry{URL: url, Headers: headers}}})
	}
}

// printClientJSON writes v indented, without HTML escaping.
func printClientJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// serverURL is the address of server name on the web listener at listen
// (host:port). A listener on every address is reached over loopback.
func serverURL(listen, name string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("[listen] http %q: %w", listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/servers/" + name, nil
}

// clientToken returns the web listener's token: [listen] http_token, else
// the one the daemon keeps in its state folder.
func clientToken(l config.Listen, getenv func(string) string) (string, error) {
	if l.HTTPToken != "" {
		return l.HTTPToken, nil
	}
	path, err := clientTokenPath(getenv)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("no token: [listen] http_token is not set and %s does not exist; "+
			"the daemon creates it on its first start with [listen] http set: start it (mcpmux serve), then run this again", path)
	case err != nil:
		return "", fmt.Errorf("read the token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("token file %s does not hold a token (one line of text); delete it and restart the daemon for a new one", path)
	}
	return token, nil
}

// clientTokenPath is where the daemon keeps a generated token:
// $XDG_STATE_HOME/mcpmux/http.token, else ~/.local/state/mcpmux/http.token.
// A relative XDG_STATE_HOME is ignored, as the XDG spec asks.
func clientTokenPath(getenv func(string) string) (string, error) {
	if dir := getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "mcpmux", "http.token"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "state", "mcpmux", "http.token"), nil
	}
	return "", errors.New("no token file: set XDG_STATE_HOME or HOME, or http_token in [listen]")
}

// shellJoin writes args as a POSIX shell command line.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuoteArg(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuoteArg quotes a for a POSIX shell when it needs it.
func shellQuoteArg(a string) string {
	safe := a != "" && !strings.ContainsFunc(a, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	})
	if safe {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
