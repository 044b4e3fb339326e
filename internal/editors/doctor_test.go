package editors_test

import (
	"os"
	"path/filepath"
	"slices"
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
		{"Codex", "/home/me/.codex/config.toml"},
		{"Codex", "/src/app/.codex/config.toml"},
		{"opencode", "/xdg/opencode/opencode.json"},
		{"opencode", "/xdg/opencode/opencode.jsonc"},
		{"opencode", "/src/app/opencode.json"},
		{"opencode", "/src/app/opencode.jsonc"},
		{"Gemini CLI", "/home/me/.gemini/settings.json"},
		{"Gemini CLI", "/src/app/.gemini/settings.json"},
		{"Zed", "/xdg/zed/settings.json"},
		{"Windsurf", "/home/me/.codeium/windsurf/mcp_config.json"},
		{"JetBrains", "/home/me/.junie/mcp/mcp.json"},
		{"JetBrains", "/src/app/.junie/mcp/mcp.json"},
	}, list(editors.Files(env(map[string]string{"HOME": "/home/me", "XDG_CONFIG_HOME": "/xdg"}), "linux", "/src/app")), "linux, XDG_CONFIG_HOME")
	assert.Equal(t, []file{
		{"Claude Code", "/Users/me/.claude.json"},
		{"Claude Code", "/Users/me/.mcp.json"},
		{"Claude Desktop", "/Users/me/Library/Application Support/Claude/claude_desktop_config.json"},
		{"Cursor", "/Users/me/.cursor/mcp.json"},
		{"VS Code", "/Users/me/Library/Application Support/Code/User/mcp.json"},
		{"VS Code", "/Users/me/Library/Application Support/Code/User/settings.json"},
		{"VS Code", "/Users/me/.vscode/mcp.json"},
		{"Codex", "/Users/me/.codex/config.toml"},
		{"opencode", "/xdg/opencode/opencode.json"},
		{"opencode", "/xdg/opencode/opencode.jsonc"},
		{"opencode", "/Users/me/opencode.json"},
		{"opencode", "/Users/me/opencode.jsonc"},
		{"Gemini CLI", "/Users/me/.gemini/settings.json"},
		{"Zed", "/xdg/zed/settings.json"},
		{"Windsurf", "/Users/me/.codeium/windsurf/mcp_config.json"},
		{"JetBrains", "/Users/me/.junie/mcp/mcp.json"},
	}, list(editors.Files(env(map[string]string{"HOME": "/Users/me", "XDG_CONFIG_HOME": "/xdg"}), "darwin", "/Users/me")), "darwin, run in the home folder: ~/.cursor/mcp.json is read once")
	assert.Equal(t, []file{
		{"Claude Code", "/src/app/.mcp.json"},
		{"Cursor", "/src/app/.cursor/mcp.json"},
		{"VS Code", "/src/app/.vscode/mcp.json"},
		{"Codex", "/src/app/.codex/config.toml"},
		{"opencode", "/xdg/opencode/opencode.json"},
		{"opencode", "/xdg/opencode/opencode.jsonc"},
		{"opencode", "/src/app/opencode.json"},
		{"opencode", "/src/app/opencode.jsonc"},
		{"Gemini CLI", "/src/app/.gemini/settings.json"},
		{"Zed", "/xdg/zed/settings.json"},
		{"JetBrains", "/src/app/.junie/mcp/mcp.json"},
	}, list(editors.Files(env(map[string]string{"XDG_CONFIG_HOME": "/xdg"}), "linux", "/src/app")), "no HOME")
	codex := slices.DeleteFunc(list(editors.Files(env(map[string]string{"HOME": "/home/me", "CODEX_HOME": "/opt/codex"}), "linux", "/src/app")),
		func(f file) bool { return f.editor != "Codex" && f.editor != "Zed" })
	assert.Equal(t, []file{
		{"Codex", "/opt/codex/config.toml"},
		{"Codex", "/src/app/.codex/config.toml"},
		{"Zed", "/home/me/.config/zed/settings.json"},
	}, codex, "CODEX_HOME; no XDG_CONFIG_HOME")
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
		{editors.Note, "editors: no MCP servers in the files of Claude Code, Claude Desktop, Cursor, VS Code, Codex, opencode, Gemini CLI, Zed, Windsurf or JetBrains (in their usual places, and in this folder)"},
	}, editors.Check(in), "a folder without editor files")
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, text, string(after), "the editor's file is left as it was")
}

// TestCheckClients: doctor reads each editor's file where that editor
// keeps it (the fixtures of testdata), in its own format.
func TestCheckClients(t *testing.T) {
	tests := []struct {
		fixture, path, editor string
		vars                  map[string]string // besides HOME; $HOME is replaced
		through, direct       string
	}{
		{"codex-config.toml", ".codex/config.toml", "Codex", nil, "memory", "context7, github, py-tools"},
		{"codex-config.toml", "codex/config.toml", "Codex", map[string]string{"CODEX_HOME": "$HOME/codex"}, "memory", "context7, github, py-tools"},
		{"opencode.json", ".config/opencode/opencode.json", "opencode", nil, "fs", "everything, github"},
		{"gemini-settings.json", ".gemini/settings.json", "Gemini CLI", nil, "memory", "github, pythonTools"},
		{"zed-settings.json", "xdg/zed/settings.json", "Zed", map[string]string{"XDG_CONFIG_HOME": "$HOME/xdg"}, "memory", "fetch, sqlite"},
		{"windsurf-mcp_config.json", ".codeium/windsurf/mcp_config.json", "Windsurf", nil, "fs", "github, memory"},
		{"junie-mcp.json", ".junie/mcp/mcp.json", "JetBrains", nil, "memory", "playwright, postgres"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			home := t.TempDir()
			exe := filepath.Join(home, "bin", "mcpmux")
			require.NoError(t, os.MkdirAll(filepath.Dir(exe), 0o700))
			require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
			data, err := os.ReadFile(filepath.Join("testdata", tt.fixture))
			require.NoError(t, err)
			file := filepath.Join(home, filepath.FromSlash(tt.path))
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o700))
			require.NoError(t, os.WriteFile(file, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/mcpmux", exe)), 0o600))
			vars := map[string]string{"HOME": home}
			for k, v := range tt.vars {
				vars[k] = strings.ReplaceAll(v, "$HOME", home)
			}
			cfg := filepath.Join(home, ".config", "mcpmux", "mux.toml")
			in := editors.Checkup{
				Getenv: func(k string) string { return vars[k] },
				GOOS:   "linux", Cwd: filepath.Join(home, "project"), Config: cfg, DefaultConfig: cfg,
				Servers: []string{"fs", "memory"},
				Tilde:   func(p string) string { return strings.Replace(p, home, "~", 1) },
			}
			where := tt.editor + " ~/" + tt.path + ": "
			assert.Equal(t, []editors.Finding{
				{editors.OK, where + tt.through + " through mcpmux"},
				{editors.Note, where + "started directly, not through mcpmux: " + tt.direct + " (`mcpmux import ~/" + tt.path + "` converts them)"},
			}, editors.Check(in))
		})
	}
}
