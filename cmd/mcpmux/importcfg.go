package main

import (
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/internal/editors"
)

func newImportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Print the [servers.NAME] tables for the MCP servers of an editor's config file",
		Long: `Reads the MCP servers configured for an editor and prints them as mcpmux
[servers.NAME] tables, to append to mux.toml. It understands:

  Claude Desktop   claude_desktop_config.json          {"mcpServers": {...}}
  Claude Code      .mcp.json, ~/.claude.json            {"mcpServers": {...}, "projects": {PATH: {"mcpServers": {...}}}}
  Cursor           ~/.cursor/mcp.json, .cursor/mcp.json {"mcpServers": {...}}
  VS Code          .vscode/mcp.json, the user mcp.json  {"servers": {...}}
                   settings.json                        {"mcp": {"servers": {...}}}
  Codex            ~/.codex/config.toml (TOML)          [mcp_servers.NAME]
  opencode         opencode.json(c), ~/.config/opencode {"mcp": {NAME: {"type": "local", ...}}}
  Gemini CLI       ~/.gemini/settings.json, a project's {"mcpServers": {...}}
  Zed              ~/.config/zed/settings.json          {"context_servers": {...}}
  Windsurf         ~/.codeium/windsurf/mcp_config.json  {"mcpServers": {...}}
  JetBrains Junie  ~/.junie/mcp/mcp.json, a project's   {"mcpServers": {...}}

Comments and trailing commas are allowed. Servers reached by URL are listed
as not imported: mcpmux runs stdio servers. Values that refer to variables
(${input:...}, ${env:...}, $NAME, {env:NAME}) are kept as they are, with a
"# check:" comment: mcpmux does not expand them. An editor's timeouts for a
server to start (when longer than mcpmux's) and for a request become
start_timeout and request_timeout, the variables it passed on (Codex's
env_vars) inherit_env, and the tools it showed or hid a "# check:" comment.

The entries of a project's config (a project's .mcp.json, .vscode/mcp.json,
.cursor/mcp.json, .codex/config.toml, opencode.json, .gemini/settings.json or
.junie/mcp/mcp.json, and the "projects" of ~/.claude.json) get share = "project":
the editor ran them in the project's folder, so mcpmux runs one per project,
in its root; ${workspaceFolder} becomes {project}, that root.

  mcpmux import ~/.cursor/mcp.json >> ~/.config/mcpmux/mux.toml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := editors.ReadFile(args[0])
			if err != nil {
				return err
			}
			name := args[0]
			if abs, err := filepath.Abs(name); err == nil {
				name = abs
			}
			imp, err := editors.Import(data, name)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), imp.TOML())
			return err
		},
	}
}
