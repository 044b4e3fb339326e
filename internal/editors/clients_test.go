package editors

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// clientFixtures are a real file of each editor in testdata, where that
// editor keeps it below the home folder, and the golden import of it.
var clientFixtures = []struct {
	fixture, path, golden string
}{
	{"codex-config.toml", ".codex/config.toml", "codex-config.want.toml"},
	{"opencode.json", ".config/opencode/opencode.json", "opencode.toml"},
	{"gemini-settings.json", ".gemini/settings.json", "gemini-settings.toml"},
	{"zed-settings.json", ".config/zed/settings.json", "zed-settings.toml"},
	{"windsurf-mcp_config.json", ".codeium/windsurf/mcp_config.json", "windsurf-mcp_config.toml"},
	{"junie-mcp.json", ".junie/mcp/mcp.json", "junie-mcp.toml"},
}

// TestImportClients imports each editor's fixture, named as that editor
// keeps it in the home folder, and compares the output with its golden
// file ($HOME standing for the home folder); the output must load.
func TestImportClients(t *testing.T) {
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	for _, tt := range clientFixtures {
		t.Run(tt.fixture, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.fixture))
			require.NoError(t, err)
			res, err := Import(data, filepath.Join(home, filepath.FromSlash(tt.path)))
			require.NoError(t, err)
			got := strings.ReplaceAll(res.TOML(), home, "$HOME")
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), got)
			_, err = config.Parse([]byte(res.TOML()), "imported.toml", "/cfg")
			require.NoError(t, err, "output:\n%s", got)
		})
	}
}

// TestImportClientShapes: a project's Codex and opencode files get share =
// "project"; opencode's entries are told from VS Code's at the same path
// by their type; a Codex file that is not valid TOML, or has no servers,
// is refused with where and what was expected.
func TestImportClientShapes(t *testing.T) {
	imported := func(t *testing.T, data, file string) []importedAs {
		t.Helper()
		res, err := Import([]byte(data), file)
		require.NoError(t, err, "file:\n%s", data)
		cfg, err := config.Parse([]byte(res.TOML()), "imported.toml", "/cfg")
		require.NoError(t, err, "output:\n%s", res.TOML())
		var servers []importedAs
		for _, s := range cfg.Servers {
			u := s.Hub.Upstream
			servers = append(servers, importedAs{s.Name(), u.Command, u.Args, u.Env, u.Dir, s.Share})
		}
		return servers
	}
	assert.Equal(t, []importedAs{{Name: "search", Command: "code-search", Args: []string{"--root", "."}, Share: "project"}},
		imported(t, "[mcp_servers.search]\ncommand = \"code-search\"\nargs = [\"--root\", \".\"]\n", "/src/app/.codex/config.toml"))
	assert.Equal(t, []importedAs{{Name: "search", Command: "code-search", Args: []string{"--root", "."}, Share: "project"}},
		imported(t, `{"mcp": {"search": {"type": "local", "command": ["code-search", "--root", "."]}}}`, "/src/app/opencode.json"))

	// opencode's second version keeps its servers in "mcp": {"servers": ...},
	// where VS Code's settings.json keeps its own.
	assert.Equal(t, []importedAs{{Name: "time", Command: "uvx", Args: []string{"mcp-server-time"}, Env: map[string]string{"TZ": "UTC"}}},
		imported(t, `{"mcp": {"servers": {"time": {"type": "local", "command": ["uvx", "mcp-server-time"], "environment": {"TZ": "UTC"}}}}}`, "opencode-v2.json"))
	assert.Equal(t, []importedAs{{Name: "time", Command: "uvx", Args: []string{"mcp-server-time"}}},
		imported(t, `{"mcp": {"servers": {"time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}}`, "settings.json"))

	for _, tt := range []struct{ name, file, wantErr string }{
		{"not TOML", "[mcp_servers.x\ncommand = 1\n", `import f.toml:1:15: not valid TOML: toml: expected `},
		{"no servers", "model = \"o3\"\n", `import f.toml: no MCP servers found: expected [mcp_servers.NAME] tables (Codex's config.toml)`},
		{"servers not a table", "mcp_servers = 3\n", `import f.toml: "mcp_servers" must be an object of servers`},
	} {
		_, err := Import([]byte(tt.file), "f.toml")
		require.Error(t, err, tt.name)
		assert.True(t, strings.HasPrefix(err.Error(), tt.wantErr), "%s\nerror: %s\nwant:  %s...", tt.name, err, tt.wantErr)
	}
}

// TestCodexRewrite reads table headers as TOML writes them, and refuses a
// server written in another form than its own [mcp_servers.NAME] table.
func TestCodexRewrite(t *testing.T) {
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"[mcp_servers.time]\n", []string{"mcp_servers", "time"}},
		{"  [ mcp_servers . \"my server\" ]  # note\n", []string{"mcp_servers", "my server"}},
		{"[mcp_servers.'a.b'.env]", []string{"mcp_servers", "a.b", "env"}},
		{"[[profiles]]", []string{"profiles"}},
		{"args = [\"x\"]", nil},
		{"[\"x\", \"y\"]", nil},
		{"# [mcp_servers.x]", nil},
	} {
		got, ok := tomlHeader([]byte(tt.line))
		assert.Equal(t, tt.want != nil, ok, "%q", tt.line)
		assert.Equal(t, tt.want, got, "%q", tt.line)
	}
	g := GroupRewrite{Path: []string{"mcp_servers"}, Drop: []string{"time"}, Name: "mcpmux", Command: []string{"/bin/mcpmux", "connect"}}
	_, err := rewriteCodex([]byte("[mcp_servers]\ntime = { command = \"uvx\" }\n"), g)
	assert.EqualError(t, err, "no [mcp_servers.time] table")
	g.Drop = []string{"fetch", "time"}
	out, err := rewriteCodex([]byte("[mcp_servers.time]\ncommand = \"uvx\"\n\n[mcp_servers.time.env]\nTZ = \"UTC\"\n\n"+
		"[mcp_servers.fetch]\ncommand = \"uvx\"\n\n# next\n[other]\nx = 1\n"), g)
	require.NoError(t, err)
	assert.Equal(t, "[mcp_servers.mcpmux]\ncommand = \"/bin/mcpmux\"\nargs = [\"connect\"]\n\n# next\n[other]\nx = 1\n", string(out),
		"the first table becomes the one entry; the others go, with the blank lines after them")
	out, err = rewriteCodex([]byte("[mcp_servers.time]\ncommand = \"uvx\"\n\n[mcp_servers.fetch]\ncommand = \"uvx\"\n\n"), g)
	require.NoError(t, err)
	assert.Equal(t, "[mcp_servers.mcpmux]\ncommand = \"/bin/mcpmux\"\nargs = [\"connect\"]\n", string(out), "no blank lines are left at the end")
	_, err = rewriteCodex([]byte("[mcp_servers.time]\ncommand = \"uvx\"\n[mcp_servers.fetch]\ncommand = \"uvx\"\n"), GroupRewrite{Path: []string{"mcp_servers"}, Drop: []string{"fetch"}, Name: "time", Command: g.Command})
	assert.Error(t, err, "an entry of that name stays")
}
