package editors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
)

// importedAs is what config.Parse makes of an imported server.
type importedAs struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	Share   string
}

// TestImportFormats converts each editor's format and checks the TOML
// text, then that config.Parse accepts it as it is and reads back the servers.
func TestImportFormats(t *testing.T) {
	cwd := t.TempDir()
	jsonCwd, err := json.Marshal(cwd)
	require.NoError(t, err)

	tests := []struct {
		name    string
		file    string
		want    string       // the whole output
		servers []importedAs // what config.Parse reads from it
	}{
		{
			name: "Claude Desktop",
			file: `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"MEMORY_FILE_PATH": "/home/me/memory.json"}},
    "filesystem": {"command": "/usr/local/bin/mcp-fs", "args": ["/home/me/Documents", "quote \" and \\ and tab\t"], "cwd": ` + string(jsonCwd) + `}
  }
}`,
			want: `# mcpmux import config.json (mcpServers): 2 servers.
# Append to mux.toml; read the "check:" comments first.

[servers.filesystem]
command = "/usr/local/bin/mcp-fs"
args = ["/home/me/Documents", "quote \" and \\ and tab\t"]
cwd = ` + tomlString(cwd) + `

[servers.memory]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-memory"]

[servers.memory.env]
MEMORY_FILE_PATH = "/home/me/memory.json"
`,
			servers: []importedAs{
				{Name: "filesystem", Command: "/usr/local/bin/mcp-fs", Args: []string{"/home/me/Documents", "quote \" and \\ and tab\t"}, Cwd: cwd},
				{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}, Env: map[string]string{"MEMORY_FILE_PATH": "/home/me/memory.json"}},
			},
		},
		{
			name: "Claude Code ~/.claude.json with projects",
			file: `{
  "numStartups": 42,
  "mcpServers": {"github": {"type": "stdio", "command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}}},
  "projects": {
    "/home/me/app": {"allowedTools": [], "mcpServers": {
      "github": {"type": "stdio", "command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}},
      "db": {"type": "stdio", "command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "app.db"]}
    }},
    "/home/me/site": {"mcpServers": {
      "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]},
      "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"}
    }},
    "/home/me/empty": {"mcpServers": {}},
    "/home/me/none": {"history": []}
  }
}`,
			want: `# mcpmux import config.json (mcpServers, Claude Code projects): 3 servers.
# Append to mux.toml; read the "check:" comments first.

[servers.github]
command = "docker"
args = ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]

[servers.github.env]
# check: ${GITHUB_TOKEN} is kept as written: mcpmux does not expand ${...}; replace it with the value
GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}"

# from Claude Code's project /home/me/app
# share = "project" (that project's entry): one process per project, run in its root, the nearest folder with .git at or above where mcpmux connect starts; {project} names it in args and env
[servers.db]
command = "uvx"
args = ["mcp-server-sqlite", "--db-path", "app.db"]
share = "project"

# from Claude Code's project /home/me/site
# share = "project" (that project's entry): one process per project, run in its root, the nearest folder with .git at or above where mcpmux connect starts; {project} names it in args and env
# renamed: "github" is taken; clients connect with: mcpmux connect github-site
[servers.github-site]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]
share = "project"

# not imported: "github" (project /home/me/app) is the same as [servers.github]
# not imported: "sentry" (project /home/me/site) is a URL server (https://mcp.sentry.dev/mcp); mcpmux serves stdio servers
`,
			servers: []importedAs{
				{Name: "db", Command: "uvx", Args: []string{"mcp-server-sqlite", "--db-path", "app.db"}, Share: "project"},
				{Name: "github", Command: "docker", Args: []string{"run", "-i", "--rm", "ghcr.io/github/github-mcp-server"}, Env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}},
				{Name: "github-site", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github"}, Share: "project"},
			},
		},
		{
			name: "entries that already run mcpmux connect",
			file: `{"mcpServers": {
  "memory": {"command": "mcpmux", "args": ["connect", "memory"]},
  "pinned": {"command": "/usr/local/bin/mcpmux", "args": ["connect", "--config", "/etc/mux.toml", "github"]},
  "spelled": {"command": "mcpmux connect fs"},
  "status": {"command": "mcpmux", "args": ["status"]}
}}`,
			want: `# mcpmux import config.json (mcpServers): 1 server.
# Append to mux.toml; read the "check:" comments first.

[servers.status]
command = "mcpmux"
args = ["status"]

# not imported: "memory" already runs ` + "`mcpmux connect memory`" + `: it is a client of mcpmux, and as a server of mcpmux it would connect to itself
# not imported: "pinned" already runs ` + "`mcpmux connect github`" + `: it is a client of mcpmux, and as a server of mcpmux it would connect to itself
# not imported: "spelled" already runs ` + "`mcpmux connect fs`" + `: it is a client of mcpmux, and as a server of mcpmux it would connect to itself
`,
			servers: []importedAs{{Name: "status", Command: "mcpmux", Args: []string{"status"}}},
		},
		{
			name: "Cursor with URL servers and odd names",
			file: `{"mcpServers": {
  "Linear": {"url": "https://mcp.linear.app/sse"},
  "windsurf-style": {"serverUrl": "https://example.com/mcp"},
  "@acme/search tool": {"command": "npx", "args": ["-y", "@acme/search"], "env": {"PORT": 3000, "DEBUG": true}},
  "acme-search-tool": {"command": "acme-search"},
  ".hidden": {"command": "hidden-mcp", "autoApprove": ["read"], "timeout": 60, "disabled": true},
  "broken": {"args": ["no", "command"]},
  "strange": "not an object"
}}`,
			want: `# mcpmux import config.json (mcpServers): 3 servers.
# Append to mux.toml; read the "check:" comments first.

# check: it is disabled in the editor; leave this table out if you do not want it
# ignored, as mcpmux has no equivalent: autoApprove, timeout
# renamed: ".hidden" is not a valid mcpmux server name (letters, digits, '.', '_', '-', starting with a letter or digit); clients connect with: mcpmux connect hidden
[servers.hidden]
command = "hidden-mcp"

# renamed: "@acme/search tool" is not a valid mcpmux server name (letters, digits, '.', '_', '-', starting with a letter or digit); clients connect with: mcpmux connect acme-search-tool
[servers.acme-search-tool]
command = "npx"
args = ["-y", "@acme/search"]

[servers.acme-search-tool.env]
DEBUG = "true"
PORT = "3000"

# renamed: "acme-search-tool" is taken; clients connect with: mcpmux connect acme-search-tool-2
[servers.acme-search-tool-2]
command = "acme-search"

# not imported: "Linear" is a URL server (https://mcp.linear.app/sse); mcpmux serves stdio servers
# not imported: "broken" has no command
# not imported: "strange" is not an object
# not imported: "windsurf-style" is a URL server (https://example.com/mcp); mcpmux serves stdio servers
`,
			servers: []importedAs{
				{Name: "acme-search-tool", Command: "npx", Args: []string{"-y", "@acme/search"}, Env: map[string]string{"DEBUG": "true", "PORT": "3000"}},
				{Name: "acme-search-tool-2", Command: "acme-search"},
				{Name: "hidden", Command: "hidden-mcp"},
			},
		},
		{
			name: "VS Code mcp.json with comments and trailing commas",
			file: `// VS Code: .vscode/mcp.json
{
  "inputs": [
    {"type": "promptString", "id": "api-key", "description": "API key", "password": true,},
  ],
  "servers": {
    /* a comment with "quotes", // and a comma, */
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch", "--user-agent=a//b,/*c*/",],}, // trailing comment
    "perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": {"PERPLEXITY_API_KEY": "${input:api-key}", "HOME": "${env:HOME}", "LANG": "${env:LANG}",},
      "envFile": "${workspaceFolder}/.env",
    },
    "py": {"command": "uv run server.py", "cwd": "${workspaceFolder}/tools"},
    "rel": {"command": "./bin/server", "cwd": "relative/dir"},
    "gone": {"command": "gone-mcp", "cwd": "/nonexistent/mcpmux-import-test"},
    "remote": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer x"},},
    "events": {"type": "sse", "url": "http://localhost:3001/sse"},
  },
}
`,
			want: `# mcpmux import config.json (VS Code servers): 5 servers.
# Append to mux.toml; read the "check:" comments first.

[servers.fetch]
command = "uvx"
args = ["mcp-server-fetch", "--user-agent=a//b,/*c*/"]

[servers.gone]
command = "gone-mcp"
# check: no such folder here: fix it, then uncomment the line
# cwd = "/nonexistent/mcpmux-import-test"

# check: it read variables from envFile "${workspaceFolder}/.env": mcpmux has no envFile; copy them into env
[servers.perplexity]
command = "npx"
args = ["-y", "server-perplexity-ask"]

[servers.perplexity.env]
# check: ${env:HOME} is kept as written: mcpmux does not expand ${...}; replace it with the value, or drop it: servers always get the daemon's HOME
HOME = "${env:HOME}"
# check: ${env:LANG} is kept as written: mcpmux does not expand ${...}; replace it with the value, or drop it and add "LANG" to inherit_env to pass on the daemon's own
LANG = "${env:LANG}"
# check: ${input:api-key} is kept as written: mcpmux does not expand ${...}; replace it with the value
PERPLEXITY_API_KEY = "${input:api-key}"

[servers.py]
# check: the command was "uv run server.py": split at spaces into command and args
command = "uv"
args = ["run", "server.py"]
# check: ${workspaceFolder} is kept as written: mcpmux does not expand ${...}; replace it with the value; then uncomment the line
# cwd = "${workspaceFolder}/tools"

[servers.rel]
# check: "./bin/server" is relative: mcpmux resolves it against mux.toml's folder; make it absolute
command = "./bin/server"
# check: not an absolute path: make it one, then uncomment the line
# cwd = "relative/dir"

# not imported: "events" is a URL server (http://localhost:3001/sse); mcpmux serves stdio servers
# not imported: "remote" is a URL server (https://api.githubcopilot.com/mcp/); mcpmux serves stdio servers
`,
			servers: []importedAs{
				{Name: "fetch", Command: "uvx", Args: []string{"mcp-server-fetch", "--user-agent=a//b,/*c*/"}},
				{Name: "gone", Command: "gone-mcp"},
				{Name: "perplexity", Command: "npx", Args: []string{"-y", "server-perplexity-ask"},
					Env: map[string]string{"PERPLEXITY_API_KEY": "${input:api-key}", "HOME": "${env:HOME}", "LANG": "${env:LANG}"}},
				{Name: "py", Command: "uv", Args: []string{"run", "server.py"}},
				{Name: "rel", Command: "/cfg/bin/server"},
			},
		},
		{
			name: "VS Code settings.json",
			file: `{
  "editor.fontSize": 14, // comments are allowed here too
  "mcp": {
    "servers": {
      "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Paris"]},
      "my.server": {"command": "python3", "args": ["-m", "my.server"], "env": {"weird key": "v", "=bad": "x"}},
    },
  },
}`,
			want: `# mcpmux import config.json (VS Code settings mcp.servers): 2 servers.
# Append to mux.toml; read the "check:" comments first.

# check: env "=bad" left out: not a valid variable name
[servers."my.server"]
command = "python3"
args = ["-m", "my.server"]

[servers."my.server".env]
"weird key" = "v"

[servers.time]
command = "uvx"
args = ["mcp-server-time", "--local-timezone=Europe/Paris"]
`,
			servers: []importedAs{
				{Name: "my.server", Command: "python3", Args: []string{"-m", "my.server"}, Env: map[string]string{"weird key": "v"}},
				{Name: "time", Command: "uvx", Args: []string{"mcp-server-time", "--local-timezone=Europe/Paris"}},
			},
		},
		{
			name: "no servers",
			file: `{"mcpServers": {}}`,
			want: "# mcpmux import config.json (mcpServers): 0 servers.\n# Append to mux.toml; read the \"check:\" comments first.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Import([]byte(tt.file), "config.json")
			require.NoError(t, err, "file:\n%s", tt.file)
			got := res.TOML()
			assert.Equal(t, tt.want, got, "file:\n%s", tt.file)

			// The output, as it is, must be a config that mcpmux accepts.
			cfg, err := config.Parse([]byte(got), "imported.toml", "/cfg")
			require.NoError(t, err, "output:\n%s", got)
			var servers []importedAs
			for _, s := range cfg.Servers {
				u := s.Hub.Upstream
				servers = append(servers, importedAs{s.Name(), u.Command, u.Args, u.Env, u.Dir, s.Share})
			}
			assert.Equal(t, tt.servers, servers, "output:\n%s", got)
		})
	}
}

// TestImportProjectFiles: the entries of a project's config (Claude Code's
// .mcp.json, a VS Code workspace's or a Cursor project's mcp.json) get
// share = "project", with the editors' names for the project's folder in
// {project}; a user's config does not.
func TestImportProjectFiles(t *testing.T) {
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	entry := `{"command": "code-search", "args": ["--root", "${workspaceFolder}"], "env": {"INDEX": "${workspaceFolder}/.index"}, "cwd": "${workspaceFolder}"}`
	for _, tt := range []struct {
		file, key string
		project   bool
	}{
		{"/src/app/.mcp.json", "mcpServers", true},
		{"/src/app/.vscode/mcp.json", "servers", true},
		{"/src/app/.cursor/mcp.json", "mcpServers", true},
		{"/src/app/.gemini/settings.json", "mcpServers", true},
		{"/src/app/.junie/mcp/mcp.json", "mcpServers", true},
		{filepath.Join(home, ".gemini", "settings.json"), "mcpServers", false},
		{filepath.Join(home, ".junie", "mcp", "mcp.json"), "mcpServers", false},
		{filepath.Join(home, ".codeium", "windsurf", "mcp_config.json"), "mcpServers", false},
		{filepath.Join(home, ".cursor", "mcp.json"), "mcpServers", false},
		{filepath.Join(home, ".config", "Code", "User", "mcp.json"), "servers", false},
		{filepath.Join(home, ".claude.json"), "mcpServers", false},
	} {
		res, err := Import([]byte(`{"`+tt.key+`": {"search": `+entry+`}}`), tt.file)
		require.NoError(t, err, tt.file)
		got := res.TOML()
		cfg, err := config.Parse([]byte(got), "imported.toml", "/cfg")
		require.NoError(t, err, "output:\n%s", got)
		require.Len(t, cfg.Servers, 1)
		s := cfg.Servers[0]
		if !tt.project {
			assert.Empty(t, s.Share, "%s is not a project's", tt.file)
			assert.Contains(t, got, "${workspaceFolder} is kept as written", tt.file)
			continue
		}
		assert.Equal(t, "project", s.Share, "%s: output:\n%s", tt.file, got)
		assert.Equal(t, []string{"--root", "{project}"}, s.Hub.Upstream.Args, tt.file)
		assert.Equal(t, map[string]string{"INDEX": "{project}/.index"}, s.Hub.Upstream.Env, tt.file)
		assert.Empty(t, s.Hub.Upstream.Dir, "the project's root is its folder")
		assert.Contains(t, got, `# share = "project" (a `, tt.file)
		assert.NotContains(t, got, "# check:", "%s: nothing left to check:\n%s", tt.file, got)
	}
}

// TestImportErrors checks that a file of another shape is refused with its
// name and what was expected.
func TestImportErrors(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		wantErr string
	}{
		{"not JSON", "[servers.x]\ncommand = \"y\"\n", `import f.json:1:2: not valid JSON: invalid character 's' looking for beginning of value; expected a JSON object with "mcpServers"`},
		{"syntax error on line 3", "{\n  \"servers\": {\n    \"a\" {}\n}", `import f.json:3:9: not valid JSON: invalid character '{' after object key`},
		{"an array", `[{"command": "x"}]`, `import f.json: not an MCP server list: expected a JSON object with "mcpServers"`},
		{"another JSON file", `{"name": "my-package", "version": "1.0.0"}`, `import f.json: no MCP servers found: expected a JSON object with "mcpServers" (Claude Desktop, Claude Code, Cursor), "projects" holding "mcpServers" (Claude Code's ~/.claude.json), "servers" (VS Code's mcp.json) or "mcp": {"servers": ...} (VS Code's settings.json)`},
		{"mcpServers not an object", `{"mcpServers": ["x"]}`, `import f.json: "mcpServers" must be an object of servers`},
		{"servers not an object", `{"servers": "x"}`, `import f.json: "servers" must be an object of servers`},
		{"empty file", ``, `import f.json:1:1: not valid JSON: unexpected end of JSON input`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Import([]byte(tt.file), "f.json")
			require.Error(t, err, "file:\n%s", tt.file)
			assert.Nil(t, res)
			assert.True(t, strings.HasPrefix(err.Error(), tt.wantErr), "file:\n%s\nerror: %s\nwant:  %s...", tt.file, err, tt.wantErr)
		})
	}
}
