package editors_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/editors"
)

// TestFiles lists where doctor looks, per system.
func TestFiles(t *testing.T) {
	type file struct{ editor, path string }
	list := func(files []editors.File) []file {
		var out []file
		for _, f := range files {
			out = append(out, file{f.Client.Name, f.Path})
		}
		return out
	}
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	assert.Equal(t, []file{
		{"Claude Code", "/home/me/.claude.json"},
		{"Claude Code", "/src/app/.mcp.json"},
		{"Claude Desktop", "/xdg/Claude/claude_desktop_config.json"},
		{"Cursor", "/home/me/.cursor/mcp.json"},
		{"Cursor", "/src/app/.cursor/mcp.json"},
		{"VS Code", "/xdg/Code/User/mcp.json"},
		{"VS Code", "/xdg/Code/User/settings.json"},
		{"VS Code", "/src/app/.vscode/mcp.json"},
	}, list(editors.Files(env(map[string]string{"HOME": "/home/me", "XDG_CONFIG_HOME": "/xdg"}), "linux", "/src/app")), "linux, XDG_CONFIG_HOME")
	assert.Equal(t, []file{
		{"Claude Code", "/Users/me/.claude.json"},
		{"Claude Code", "/Users/me/.mcp.json"},
		{"Claude Desktop", "/Users/me/Library/Application Support/Claude/claude_desktop_config.json"},
		{"Cursor", "/Users/me/.cursor/mcp.json"},
		{"VS Code", "/Users/me/Library/Application Support/Code/User/mcp.json"},
		{"VS Code", "/Users/me/Library/Application Support/Code/User/settings.json"},
		{"VS Code", "/Users/me/.vscode/mcp.json"},
	}, list(editors.Files(env(map[string]string{"HOME": "/Users/me", "XDG_CONFIG_HOME": "/xdg"}), "darwin", "/Users/me")), "darwin, run in the home folder: ~/.cursor/mcp.json is read once")
	assert.Equal(t, []file{
		{"Claude Code", "/src/app/.mcp.json"},
		{"Cursor", "/src/app/.cursor/mcp.json"},
		{"VS Code", "/src/app/.vscode/mcp.json"},
	}, list(editors.Files(env(map[string]string{"XDG_CONFIG_HOME": "/xdg"}), "linux", "/src/app")), "no HOME")
}

// TestCheck: an editor's entries that run mcpmux connect are checked
// against the config doctor checks; the file is only read.
func TestCheck(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, ".config", "mcpmux", "mux.toml")
	cwd := filepath.Join(home, "project")
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, ".cursor"), 0o700))
	file := filepath.Join(cwd, ".cursor", "mcp.json")
	text := `{"mcpServers": {
		"memory": {"command": "/no/such/mcpmux", "args": ["connect", "memory"]},
		"nameless": {"command": "/no/such/mcpmux", "args": ["connect"]},
		"web": {"url": "http://example.com/mcp"}
	}}`
	require.NoError(t, os.WriteFile(file, []byte(text), 0o600))
	in := editors.Checkup{
		Getenv: func(k string) string { return map[string]string{"HOME": home}[k] },
		GOOS:   "linux", Cwd: cwd, Config: cfg, DefaultConfig: cfg,
		Servers: []string{"memory"},
		Tilde:   func(p string) string { return strings.Replace(p, home, "~", 1) },
	}
	where := "Cursor ~/project/.cursor/mcp.json: "
	assert.Equal(t, []editors.Finding{
		{editors.Warn, where + "\"nameless\" runs `mcpmux connect all`, and the config has no server all (it has: memory)"},
		{editors.Warn, where + "starts /no/such/mcpmux, which is not an executable file: `mcpmux client-config NAME --for cursor` prints the entry with this mcpmux"},
		{editors.OK, where + "memory through mcpmux"},
	}, editors.Check(in))
	in.Endpoints = []string{"all"} // `mcpmux connect` with no name reaches it
	assert.Equal(t, []editors.Finding{
		{editors.Warn, where + "starts /no/such/mcpmux, which is not an executable file: `mcpmux client-config NAME --for cursor` prints the entry with this mcpmux"},
		{editors.OK, where + "memory, all through mcpmux"},
	}, editors.Check(in))

	in.Cwd = filepath.Join(home, "elsewhere")
	assert.Equal(t, []editors.Finding{
		{editors.Note, "editors: no MCP servers in the files of Claude Code, Claude Desktop, Cursor or VS Code (in their usual places, and in this folder)"},
	}, editors.Check(in), "a folder without editor files")
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, text, string(after), "the editor's file is left as it was")
}
