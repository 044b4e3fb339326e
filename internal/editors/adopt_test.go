package editors

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/endpoint"
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
    },
    "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]},
    "time": {"command": "uvx", "args": ["mcp-server-time"]}
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

[mcp_servers.mcpmux]
command = "/opt/bin/mcpmux"
args = ["connect", "codex"]

# pages
[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"

[projects."/home/me/src/app"]
trust_level = "trusted"
`

// TestAdopt adopts the servers of ten editors' files: each file then has
// one entry that runs mcpmux connect of an endpoint holding exactly the
// servers it ran, with the tools it showed, and keeps every other byte;
// --undo puts every file back exactly; a plan writes nothing.
func TestAdopt(t *testing.T) {
	home := t.TempDir()
	testutil.WriteTree(t, home, adoptHome)
	in := adoptInput(t, home, filepath.Join(home, "proj"))
	cfgPath := in.Config
	before := testutil.HashTree(t, home)
	plan, err := PlanAdoption(in)
	require.NoError(t, err)
	assert.Equal(t, before, testutil.HashTree(t, home), "a plan writes nothing")

	assert.Equal(t, []string{
		`Claude Code ~/proj/.mcp.json: search, as one entry "mcpmux-proj" (the endpoint claude-proj)`,
		`Claude Desktop ~/.config/Claude/claude_desktop_config.json: fs, memory, as one entry "mcpmux" (the endpoint claude-desktop)`,
		`Cursor ~/.cursor/mcp.json: mem as memory, as one entry "mcpmux" (the endpoint cursor)`,
		`VS Code ~/.config/Code/User/mcp.json: time as clock, as one entry "mcpmux" (the endpoint vscode)`,
		`Codex ~/.codex/config.toml: time, as one entry "mcpmux" (the endpoint codex)`,
		`opencode ~/.config/opencode/opencode.json: fetch, as one entry "mcpmux" (the endpoint opencode)`,
		`Gemini CLI ~/.gemini/settings.json: github, as one entry "mcpmux" (the endpoint gemini)`,
		`Zed ~/.config/zed/settings.json: fs, as one entry "mcpmux" (the endpoint zed)`,
		`Windsurf ~/.codeium/windsurf/mcp_config.json: fetch, time as clock, as one entry "mcpmux" (the endpoint windsurf)`,
		`JetBrains ~/.junie/mcp/mcp.json: playwright, as one entry "mcpmux" (the endpoint jetbrains)`,
	}, plan.Adopted)
	assert.Equal(t, []string{
		"Cursor ~/.cursor/mcp.json: \"linear\" is a URL server (https://mcp.linear.app/sse); mcpmux serves stdio servers",
		"Cursor ~/.cursor/mcp.json: \"odd\" left as it is: adopt does not know its autoApprove",
		"Codex ~/.codex/config.toml: \"figma\" is a URL server (https://mcp.figma.com/mcp); mcpmux serves stdio servers",
		"Windsurf ~/.codeium/windsurf/mcp_config.json: \"memory\" left as it is: it is disabled in the editor",
	}, plan.Left)
	assert.Equal(t, []string{
		`Codex ~/.codex/config.toml: "time": startup_timeout_sec = 20: the one entry that replaces it has no setting per server; mcpmux's own start_timeout bounds the server`,
		`opencode ~/.config/opencode/opencode.json: "fetch": timeout = 60000: the one entry that replaces it has no setting per server; mcpmux's own start_timeout bounds the server`,
		`Gemini CLI ~/.gemini/settings.json: "github": timeout = 30000: the one entry that replaces it has no setting per server; mcpmux's own request_timeout bounds the server`,
	}, plan.NotCarried)
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

	// mux.toml keeps what it had and loads with the new servers and endpoints.
	newCfg, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(newCfg), adoptHome[".config/mcpmux/mux.toml"]+"\n# mcpmux adopt: 7 servers"), "mux.toml:\n%s", newCfg)
	assert.Contains(t, string(newCfg), "# max_concurrency = 1: server-memory reads and rewrites its whole file on each call")
	assert.NotContains(t, string(newCfg), "enabled_tools", "the endpoint shows what Codex showed")
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err, "mux.toml:\n%s", newCfg)
	servers := map[string]daemon.Server{}
	for _, s := range cfg.Servers {
		servers[s.Name()] = s
	}
	assert.Equal(t, 1, servers["memory"].Hub.MaxConcurrency)
	assert.Equal(t, "project", servers["search"].Share)
	assert.Equal(t, []string{"--root", "{project}"}, servers["search"].Hub.Upstream.Args)
	assert.Equal(t, []string{"time__get_current_time"}, cfg.Endpoint("codex").AllowTools, "Codex's enabled_tools")
	assert.Equal(t, []string{"github__get_issue"}, cfg.Endpoint("gemini").AllowTools, "Gemini's includeTools")
	assert.Nil(t, cfg.Endpoint("zed").AllowTools)

	for path, old := range olds {
		if path == cfgPath {
			continue
		}
		now, err := os.ReadFile(path)
		require.NoError(t, err)
		backup, err := os.ReadFile(path + BackupSuffix)
		require.NoError(t, err, path)
		assert.Equal(t, string(old), string(backup), "the backup is the file as it was")
		assertReachesSame(t, cfg, path, old, now)
		if strings.HasSuffix(path, ".toml") {
			assert.Equal(t, codexAfter, string(now), "only the servers' tables change")
			continue
		}
		assertOnlyServersChange(t, path, old, now)
	}

	// doctor finds each file's one entry reaching this config.
	check := Checkup{Getenv: in.Getenv, GOOS: in.GOOS, Cwd: in.Cwd, Config: cfgPath, DefaultConfig: cfgPath,
		Tilde: func(p string) string { return tildePath(in.Getenv, p) }}
	for _, s := range cfg.Servers {
		check.Servers = append(check.Servers, s.Name())
	}
	for _, e := range cfg.Endpoints {
		check.Endpoints = append(check.Endpoints, e.Name)
	}
	var through []string
	for _, f := range Check(check) {
		if f.Level == OK {
			through = append(through, f.Text)
		}
		assert.False(t, f.Level == Warn && !strings.Contains(f.Text, "/opt/bin/mcpmux, which is not an executable"), "doctor: %s", f.Text)
	}
	assert.Len(t, through, len(plan.Adopted), "doctor: %v", through)
	assert.Contains(t, through, "Codex ~/.codex/config.toml: codex through mcpmux")

	// Adopting again finds nothing new: every file reaches its servers through mcpmux.
	again, err := PlanAdoption(adoptInput(t, home, filepath.Join(home, "proj")))
	require.NoError(t, err)
	assert.Empty(t, again.Added)
	assert.Empty(t, again.Endpoints)
	assert.Empty(t, again.Rewrites)
	assert.Equal(t, plan.Left, again.Left, "the entries it wrote are not listed as left")

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

// TestAdoptEndpoints: a file that ran every configured server, showing all
// their tools, gets mcpmux connect (the endpoint all); one that ran some,
// or hid tools, gets an endpoint of its own, whose name takes none that
// mux.toml has; a project's file gets "mcpmux-PROJECT".
func TestAdoptEndpoints(t *testing.T) {
	home := t.TempDir()
	testutil.WriteTree(t, home, map[string]string{
		".config/mcpmux/mux.toml":                   "[servers.a]\ncommand = \"a-mcp\"\n\n[servers.b]\ncommand = \"b-mcp\"\n\n[endpoints.cursor]\nservers = [\"a\"]\n",
		".config/Claude/claude_desktop_config.json": `{"mcpServers": {"x": {"command": "a-mcp"}, "y": {"command": "b-mcp"}}}`,
		".cursor/mcp.json":                          `{"mcpServers": {"a": {"command": "a-mcp"}, "mcpmux": {"url": "https://example.com/mcp"}}}`,
		".codex/config.toml":                        "[mcp_servers.a]\ncommand = \"a-mcp\"\n\n[mcp_servers.b]\ncommand = \"b-mcp\"\ndisabled_tools = [\"drop\"]\n",
		".gemini/settings.json":                     `{"mcpServers": {"a": {"command": "a-mcp", "includeTools": ["t"]}, "b": {"command": "b-mcp"}}}`,
		"app/.cursor/mcp.json":                      `{"mcpServers": {"b": {"command": "b-mcp"}}}`,
		".claude.json":                              `{"mcpServers": {"a": {"command": "a-mcp"}}, "projects": {"/src/app": {"mcpServers": {"b": {"command": "b-mcp"}}}}}`,
		"app/.mcp.json":                             `{"mcpServers": {"b": {"command": "b-mcp"}}}`,
		".codeium/windsurf/mcp_config.json": `{"mcpServers": {"a": {"command": "/opt/bin/mcpmux", "args": ["connect", "a"], "disabledTools": ["x"]}, ` +
			`"b": {"command": "b-mcp"}, "c": {"command": "/opt/bin/mcpmux", "args": ["connect", "--config", "/elsewhere/mux.toml", "a"]}}}`,
		".junie/mcp/mcp.json": `{"mcpServers": {"a": {"command": "a-mcp"}, "b": {"command": "b-mcp", "includeTools": []}}}`,
	})
	in := adoptInput(t, home, filepath.Join(home, "app"))
	plan, err := PlanAdoption(in)
	require.NoError(t, err)
	assert.Empty(t, plan.Added)
	assert.Equal(t, []string{
		`Claude Code ~/.claude.json: a, as one entry "mcpmux" (the endpoint claude)`,
		`Claude Code ~/.claude.json (project /src/app): b, as one entry "mcpmux-app" (the endpoint claude-app)`,
		`Claude Code ~/app/.mcp.json: b, as one entry "mcpmux-app-2" (the endpoint claude-app-2)`,
		`Claude Desktop ~/.config/Claude/claude_desktop_config.json: x as a, y as b, as one entry "mcpmux" (the endpoint all)`,
		`Cursor ~/.cursor/mcp.json: a, as one entry "mcpmux-2" (the endpoint cursor-2)`,
		`Cursor ~/app/.cursor/mcp.json: b, as one entry "mcpmux-app" (the endpoint cursor-app)`,
		`Codex ~/.codex/config.toml: a, b, as one entry "mcpmux" (the endpoint codex)`,
		`Gemini CLI ~/.gemini/settings.json: a, b, as one entry "mcpmux" (the endpoint gemini)`,
		`Windsurf ~/.codeium/windsurf/mcp_config.json: a, b, as one entry "mcpmux" (the endpoint windsurf)`,
		`JetBrains ~/.junie/mcp/mcp.json: a, b, as one entry "mcpmux" (the endpoint jetbrains)`,
	}, plan.Adopted, "an entry an adopt before endpoints wrote, mcpmux connect a, is the server a")
	assert.Equal(t, []string{"Cursor ~/.cursor/mcp.json: \"mcpmux\" is a URL server (https://example.com/mcp); mcpmux serves stdio servers",
		"Windsurf ~/.codeium/windsurf/mcp_config.json: \"c\" already runs `mcpmux connect a`: " +
			"it is a client of mcpmux, and as a server of mcpmux it would connect to itself"}, plan.Left, "one of another config is left")
	require.NoError(t, plan.Apply())
	cfg, err := config.Load(in.Config)
	require.NoError(t, err)
	assert.Equal(t, endpoint.Config{Name: "cursor-2", Servers: []string{"a"}}, *cfg.Endpoint("cursor-2"))
	assert.Equal(t, endpoint.Config{Name: "cursor-app", Servers: []string{"b"}}, *cfg.Endpoint("cursor-app"))
	assert.Equal(t, endpoint.Config{Name: "codex", Servers: []string{"a", "b"}, DenyTools: []string{"b__drop"}}, *cfg.Endpoint("codex"))
	assert.Equal(t, endpoint.Config{Name: "gemini", Servers: []string{"a", "b"}, AllowTools: []string{"a__t", "b__*"}}, *cfg.Endpoint("gemini"))
	assert.Equal(t, endpoint.Config{Name: "jetbrains", Servers: []string{"a", "b"}, DenyTools: []string{"b__*"}}, *cfg.Endpoint("jetbrains"),
		"includeTools = [] showed none of b's tools")
	assert.Equal(t, endpoint.Config{Name: "windsurf", Servers: []string{"a", "b"}, DenyTools: []string{"a__x"}}, *cfg.Endpoint("windsurf"))
	claude, err := os.ReadFile(filepath.Join(home, ".claude.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"mcpServers": {"mcpmux": {"command":"/opt/bin/mcpmux","args":["connect","claude"]}}, "projects": {"/src/app": {"mcpServers": {"mcpmux-app": {"command":"/opt/bin/mcpmux","args":["connect","claude-app"]}}}}}`, string(claude))
	desktop, err := os.ReadFile(filepath.Join(home, ".config/Claude/claude_desktop_config.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"mcpServers": {"mcpmux": {"command":"/opt/bin/mcpmux","args":["connect"]}}}`, string(desktop))
	cursor, err := os.ReadFile(filepath.Join(home, ".cursor/mcp.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"mcpServers": {"mcpmux-2": {"command":"/opt/bin/mcpmux","args":["connect","cursor-2"]}, "mcpmux": {"url": "https://example.com/mcp"}}}`, string(cursor),
		"an entry the file keeps keeps its name")
}

// adoptInput is what adopt knows in home, run in cwd, as /opt/bin/mcpmux,
// with mux.toml in its default place.
func adoptInput(t *testing.T, home, cwd string) AdoptInput {
	cfgPath := filepath.Join(home, ".config", "mcpmux", "mux.toml")
	text, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	cfg, err := config.Load(cfgPath)
	require.NoError(t, err)
	in := AdoptInput{
		Getenv: func(k string) string { return map[string]string{"HOME": home}[k] },
		GOOS:   "linux", Cwd: cwd, Config: cfgPath, ConfigText: text,
		Connect: []string{"/opt/bin/mcpmux", "connect"},
	}
	for _, s := range cfg.Servers {
		u := s.Hub.Upstream
		in.Servers = append(in.Servers, Server{Name: s.Name(), Command: u.Command, Args: u.Args, Env: u.Env, Cwd: u.Dir, Share: s.Share})
	}
	return in
}

// assertReachesSame checks, by reading the editor's file back, that it
// keeps the entries adopt left, and that its one new entry runs mcpmux
// connect of an endpoint that holds exactly the servers of the entries it
// replaced: a server that runs each, and no other.
func assertReachesSame(t *testing.T, cfg *config.Config, path string, old, now []byte) {
	t.Helper()
	was, err := editorEntries(old, path)
	require.NoError(t, err)
	is, err := editorEntries(now, path)
	require.NoError(t, err, "%s:\n%s", path, now)
	var connects []connectEntry
	kept := map[string]bool{}
	for _, e := range is {
		if c, ok := parseConnect(e); ok {
			connects = append(connects, c)
			continue
		}
		kept[e.label] = true
		i := slices.IndexFunc(was, func(w editorEntry) bool { return w.label == e.label })
		require.GreaterOrEqual(t, i, 0, "%s: %s", path, e.label)
		assert.Equal(t, was[i], e, "%s: an entry not adopted is left as it was", path)
	}
	require.Len(t, connects, 1, "%s: one entry through mcpmux", path)
	ep := cfg.Endpoint(cmp.Or(connects[0].name, "all"))
	require.NotNil(t, ep, "%s: %s", path, connects[0].name)
	reached := map[string]bool{}
	for _, w := range was {
		if kept[w.label] {
			continue
		}
		i := slices.IndexFunc(ep.Servers, func(name string) bool {
			s := cfg.Server(name)
			return s != nil && s.Hub.Upstream.Command == w.command && (s.Share == "project" || slices.Equal(s.Hub.Upstream.Args, w.args))
		})
		require.GreaterOrEqual(t, i, 0, "%s: %q runs a server of the endpoint %s (%v)", path, w.label, ep.Name, ep.Servers)
		reached[ep.Servers[i]] = true
	}
	assert.Len(t, ep.Servers, len(reached), "%s: the endpoint %s holds no other server", path, ep.Name)
}

// assertOnlyServersChange checks that a JSON file is byte for byte what
// it was before and after its object of servers, and that the entries it
// keeps there are too.
func assertOnlyServersChange(t *testing.T, path string, old, now []byte) {
	t.Helper()
	top, _, err := decodeFile(old, path)
	require.NoError(t, err)
	sources, err := importSources(top, &Result{})
	require.NoError(t, err)
	for _, src := range sources {
		ostart, oend, ok := memberSpan(stripJSONC(old), src.path)
		require.True(t, ok)
		nstart, nend, ok := memberSpan(stripJSONC(now), src.path)
		require.True(t, ok)
		assert.Equal(t, string(old[:ostart]), string(now[:nstart]), "%s: before its servers", path)
		assert.Equal(t, string(old[oend:]), string(now[nend:]), "%s: after its servers", path)
		for _, m := range objectMembers(stripJSONC(now), nstart, nend) {
			if i := slices.IndexFunc(objectMembers(stripJSONC(old), ostart, oend), func(o jsonMember) bool { return o.name == m.name }); i >= 0 {
				o := objectMembers(stripJSONC(old), ostart, oend)[i]
				assert.Equal(t, string(old[o.keyStart:o.valueEnd]), string(now[m.keyStart:m.valueEnd]), "%s: %s is kept", path, m.name)
			}
		}
	}
}

// TestAdoptNamesClash: a new server does not take the name of an endpoint
// of mux.toml, nor a new endpoint that of a server.
func TestAdoptNamesClash(t *testing.T) {
	home := t.TempDir()
	testutil.WriteTree(t, home, map[string]string{
		".config/mcpmux/mux.toml": "[servers.a]\ncommand = \"a-mcp\"\n\n[endpoints.codex]\nservers = [\"a\"]\n",
		".cursor/mcp.json":        `{"mcpServers": {"codex": {"command": "x-mcp"}, "cursor": {"command": "y-mcp"}}}`,
	})
	plan, err := PlanAdoption(adoptInput(t, home, filepath.Join(home, "elsewhere")))
	require.NoError(t, err)
	require.Len(t, plan.Added, 2)
	assert.Equal(t, "codex-2", plan.Added[0].Name)
	assert.Equal(t, []string{`Cursor ~/.cursor/mcp.json: codex as codex-2, cursor, as one entry "mcpmux" (the endpoint cursor-2)`}, plan.Adopted)
	require.NoError(t, plan.Apply())
	cfg, err := config.Load(filepath.Join(home, ".config", "mcpmux", "mux.toml"))
	require.NoError(t, err)
	assert.Equal(t, []string{"codex-2", "cursor"}, cfg.Endpoint("cursor-2").Servers)
}
