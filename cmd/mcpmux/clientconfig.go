package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/shell"
)

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
		fmt.Fprintln(out, shell.Join(line))
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
