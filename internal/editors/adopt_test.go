package editors

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// adoptHome is a home folder with the files of eight editors (in the
// shapes of Claude Desktop, Cursor, VS Code, opencode, Gemini CLI, Zed,
// Windsurf and Junie), a project with a .mcp.json and Codex's config.toml,
// and a mux.toml that has one of their servers already.
var adoptHome = map[string]string{
	".config/Claude/claude_desktop_config.json": `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Documents"]}
  }
}
`,
	".cursor/mcp.json": `{
  "mcpServers": {
    "mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    "linear": {"url": "https://mcp.linear.app/sse"},
    "odd": {"command": "odd-mcp", "autoApprove": ["read"]}
  }
}
`,
	".config/Code/User/mcp.json": `// VS Code user MCP servers
{
  "servers": {
    /* the clock */
    "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"],}, // trailing
  },
  "inputs": [],
}
`,
	".config/opencode/opencode.json": `{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "fetch": {"type": "local", "command": ["uvx", "mcp-server-fetch"], "enabled": true, "timeout": 60000},
  },
}
`,
	".gemini/settings.json": `{
  "theme": "GitHub",
  "mcpServers": {
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "includeTools": ["get_issue"], "timeout": 30000}
  }
}
`,
	".config/zed/settings.json": `// Zed settings
{
  "ui_font_size": 16,
  "context_servers": {
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Documents"], "env": {}},
  },
}
`,
	".codeium/windsurf/mcp_config.json": `{
  "mcpServers": {
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"],
      "disabled": true
    }
  }
}
`,
	".junie/mcp/mcp.json": `{"mcpServers": {"playwright": {"command": "npx", "args": ["@playwright/mcp@latest"]}}}
`,
	"proj/.mcp.json": `{"mcpServers": {"search": {"command": "code-search", "args": ["--root", "${CLAUDE_PROJECT_DIR}"]}}}
`,
	".codex/config.toml":      codexBefore,
	".config/mcpmux/mux.toml": "# my servers\n[servers.clock]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]\n",
}

const codexBefore = `# Codex: ~/.codex/config.toml
model = "gpt-5-codex"

[mcp_servers.time]
command = "uvx"
args = [
  "mcp-server-time",
]
startup_timeout_sec = 20 # the default is 10
enabled_tools = ["get_current_time"]

[mcp_servers.time.env]
TZ = "UTC"

# pages
[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"

[projects."/home/me/src/app"]
trust_level = "trusted"
`

const codexAfter = `# Codex: ~/.codex/config.toml
model = "gpt-5-codex"

[mcp_servers.time]
command = "/opt/bin/mcpmux"
args = ["connect", "time"]
enabled_tools = ["get_current_time"]
startup_timeout_sec = 20

# pages
[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"

[projects."/home/me/src/app"]
trust_level = "trusted"
`

// TestAdopt adopts the servers of eight editors' files: each file then
// reaches the same servers through mcpmux connect and keeps every other
// byte; --undo puts every file back exactly; a plan writes nothing.
func TestAdopt(t *testing.T) {
	home := t.TempDir()
	testutil.WriteTree(t, home, adoptHome)
	cfgPath := filepath.Join(home, ".config", "mcpmux", "mux.toml")
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	in := AdoptInput{
		Getenv: func(k string) string { return map[string]string{"HOME": home}[k] },
		GOOS:   "linux", Cwd: filepath.Join(home, "proj"), Config: cfgPath,
		ConfigText: []byte(adoptHome[".config/mcpmux/mux.toml"]),
		Connect:    []string{"/opt/bin/mcpmux", "connect"},
	}
	for _, s := range cfg.Servers {
		u := s.Hub.Upstream
		in.Servers = append(in.Servers, Server{Name: s.Name(), Command: u.Command, Args: u.Args, Env: u.Env, Cwd: u.Dir, Share: s.Share})
	}
	before := testutil.HashTree(t, home)
	plan, err := PlanAdoption(in)
	require.NoError(t, err)
	assert.Equal(t, before, testutil.HashTree(t, home), "a plan writes nothing")

	assert.Equal(t, []string{
		"Claude Code ~/proj/.mcp.json: search",
		"Claude Desktop ~/.config/Claude/claude_desktop_config.json: fs, memory",
		"Cursor ~/.cursor/mcp.json: mem as memory",
		"VS Code ~/.config/Code/User/mcp.json: time as clock",
		"Codex ~/.codex/config.toml: time",
		"opencode ~/.config/opencode/opencode.json: fetch",
		"Gemini CLI ~/.gemini/settings.json: github",
		"Zed ~/.config/zed/settings.json: fs",
		"Windsurf ~/.codeium/windsurf/mcp_config.json: memory",
		"JetBrains ~/.junie/mcp/mcp.json: playwright",
	}, plan.Adopted)
	assert.Equal(t, []string{
		"Cursor ~/.cursor/mcp.json: \"linear\" is a URL server (https://mcp.linear.app/sse); mcpmux serves stdio servers",
		"Cursor ~/.cursor/mcp.json: \"odd\" left as it is: adopt does not know its autoApprove",
		"Codex ~/.codex/config.toml: \"figma\" is a URL server (https://mcp.figma.com/mcp); mcpmux serves stdio servers",
	}, plan.Left)
	var added []string
	for _, s := range plan.Added {
		added = append(added, s.Name)
	}
	assert.Equal(t, []string{"search", "fs", "memory", "time", "fetch", "github", "playwright"}, added)

	olds := map[string][]byte{}
	for _, r := range plan.Rewrites {
		olds[r.Path] = r.Old
	}
	require.NoError(t, plan.Apply())

	// mux.toml keeps what it had and loads with the new servers.
	newCfg, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(newCfg), adoptHome[".config/mcpmux/mux.toml"]+"\n# mcpmux adopt: 7 servers"), "mux.toml:\n%s", newCfg)
	assert.Contains(t, string(newCfg), "# max_concurrency = 1: server-memory reads and rewrites its whole file on each call")
	cfg, err = config.Load(cfgPath)
	require.NoError(t, err, "mux.toml:\n%s", newCfg)
	servers := map[string]daemon.Server{}
	for _, s := range cfg.Servers {
		servers[s.Name()] = s
	}
	assert.Equal(t, 1, servers["memory"].Hub.MaxConcurrency)
	assert.Equal(t, "project", servers["search"].Share)
	assert.Equal(t, []string{"--root", "{project}"}, servers["search"].Hub.Upstream.Args)

	for path, old := range olds {
		if path == cfgPath {
			continue
		}
		now, err := os.ReadFile(path)
		require.NoError(t, err)
		backup, err := os.ReadFile(path + BackupSuffix)
		require.NoError(t, err, path)
		assert.Equal(t, string(old), string(backup), "the backup is the file as it was")

		// Every entry that ran a server now runs mcpmux connect for a
		// server of mux.toml that runs the same thing.
		was, err := editorEntries(old, path)
		require.NoError(t, err)
		is, err := editorEntries(now, path)
		require.NoError(t, err, "%s:\n%s", path, now)
		require.Len(t, is, len(was), path)
		for i, e := range is {
			c, ok := parseConnect(e)
			if !ok {
				assert.Equal(t, was[i], e, "%s: an entry not adopted is left as it was", path)
				continue
			}
			assert.Equal(t, []string{"connect", c.name}, e.args, path)
			s, ok := servers[c.name]
			require.True(t, ok, "%s: %s", path, c.name)
			assert.Equal(t, was[i].command, s.Hub.Upstream.Command, "%s: %s", path, c.name)
			if s.Share != "project" {
				assert.Equal(t, was[i].args, s.Hub.Upstream.Args, "%s: %s", path, c.name)
			}
		}

		// Put the old entries' text back in place of the new: the rest
		// of the file is byte for byte what it was.
		if strings.HasSuffix(path, ".toml") {
			assert.Equal(t, codexAfter, string(now), "only the server's table changes, keeping Codex's own keys")
			continue
		}
		top, _, err := decodeFile(old, path)
		require.NoError(t, err)
		sources, err := importSources(top, &Result{})
		require.NoError(t, err)
		restored := slices.Clone(now)
		type span struct{ start, end int }
		var spans []struct{ old, new span }
		for _, src := range sources {
			for name := range src.entries {
				p := append(slices.Clone(src.path), name)
				ostart, oend, ok := memberSpan(stripJSONC(old), p)
				require.True(t, ok)
				ns, ne, ok := memberSpan(stripJSONC(now), p)
				require.True(t, ok)
				spans = append(spans, struct{ old, new span }{span{ostart, oend}, span{ns, ne}})
			}
		}
		slices.SortFunc(spans, func(a, b struct{ old, new span }) int { return b.new.start - a.new.start })
		for _, sp := range spans {
			restored = slices.Concat(restored[:sp.new.start], old[sp.old.start:sp.old.end], restored[sp.new.end:])
		}
		assert.Equal(t, string(old), string(restored), "%s: only its entries change; now:\n%s", path, now)
	}
	windsurf, err := os.ReadFile(filepath.Join(home, ".codeium", "windsurf", "mcp_config.json"))
	require.NoError(t, err)
	assert.Contains(t, string(windsurf), `"memory": {"command":"/opt/bin/mcpmux","args":["connect","memory"],"disabled":true}`, "the editor's own keys stay")
	gemini, err := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	require.NoError(t, err)
	assert.Contains(t, string(gemini), `"github": {"command":"/opt/bin/mcpmux","args":["connect","github"],"includeTools":["get_issue"],"timeout":30000}`)

	// Adopting again finds nothing new: every entry runs mcpmux connect.
	again, err := PlanAdoption(in)
	require.NoError(t, err)
	assert.Empty(t, again.Added)

	restoredPaths, err := Undo(AdoptedFiles(in.Getenv, in.GOOS, in.Cwd, cfgPath))
	require.NoError(t, err)
	assert.Len(t, restoredPaths, len(olds))
	for p, text := range adoptHome {
		data, err := os.ReadFile(filepath.Join(home, filepath.FromSlash(p)))
		require.NoError(t, err)
		assert.Equal(t, text, string(data), "%s is put back exactly", p)
	}
	assert.Equal(t, before, testutil.HashTree(t, home), "--undo leaves the tree as it was, backups gone")
}
