package editors_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/editors"
)

// TestClientConfigTokenPath checks where the daemon's token is looked for.
func TestClientConfigTokenPath(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG_STATE_HOME", map[string]string{"XDG_STATE_HOME": "/state", "HOME": "/home/me"}, "/state/mcpmux/http.token"},
		{"relative XDG_STATE_HOME is ignored", map[string]string{"XDG_STATE_HOME": "state", "HOME": "/home/me"}, "/home/me/.local/state/mcpmux/http.token"},
		{"HOME", map[string]string{"HOME": "/home/me"}, "/home/me/.local/state/mcpmux/http.token"},
		{"nothing set", map[string]string{}, ""},
	}
	for _, tt := range tests {
		got, err := editors.TokenPath(func(k string) string { return tt.env[k] })
		if tt.want == "" {
			assert.Error(t, err, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.want, got, tt.name)
	}
}

// TestClientConfigServerURL checks the URL made from [listen] http.
func TestClientConfigServerURL(t *testing.T) {
	tests := []struct{ listen, want string }{
		{"127.0.0.1:7878", "http://127.0.0.1:7878/servers/memory"},
		{"localhost:80", "http://localhost:80/servers/memory"},
		{"[::1]:7878", "http://[::1]:7878/servers/memory"},
		{"0.0.0.0:7878", "http://127.0.0.1:7878/servers/memory"},
		{":7878", "http://127.0.0.1:7878/servers/memory"},
		{"[::]:7878", "http://[::1]:7878/servers/memory"},
	}
	for _, tt := range tests {
		got, err := editors.ServerURL(tt.listen, "memory")
		require.NoError(t, err, tt.listen)
		assert.Equal(t, tt.want, got, tt.listen)
	}
}

// TestClientConfigMatchesEditorSchemas decodes each editor's snippet with
// that editor's shape, strictly, and checks what points at mcpmux.
func TestClientConfigMatchesEditorSchemas(t *testing.T) {
	const exe = "/usr/local/bin/mcpmux"
	type stdio struct {
		Type    string   `json:"type,omitempty"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	decode := func(t *testing.T, editor string, v any) {
		t.Helper()
		var out bytes.Buffer
		client, err := editors.Lookup(editor)
		require.NoError(t, err)
		require.NoError(t, client.PrintStdio(&out, io.Discard, "memory", []string{exe, "connect", "memory"}))
		text := out.String()
		text = text[strings.Index(text, "{"):] // Claude Code's text leads with a command line
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(v), "%s snippet:\n%s", editor, text)
	}
	for _, editor := range []string{"claude", "claude-desktop", "cursor", "gemini", "windsurf", "jetbrains"} {
		var doc struct {
			MCPServers map[string]stdio `json:"mcpServers"`
		}
		decode(t, editor, &doc)
		assert.Equal(t, map[string]stdio{"memory": {Command: exe, Args: []string{"connect", "memory"}}}, doc.MCPServers, editor)
	}
	var vscode struct {
		Servers map[string]stdio `json:"servers"`
	}
	decode(t, "vscode", &vscode)
	assert.Equal(t, map[string]stdio{"memory": {Type: "stdio", Command: exe, Args: []string{"connect", "memory"}}}, vscode.Servers)
	var zed struct {
		ContextServers map[string]stdio `json:"context_servers"`
	}
	decode(t, "zed", &zed)
	assert.Equal(t, map[string]stdio{"memory": {Command: exe, Args: []string{"connect", "memory"}}}, zed.ContextServers)
	type local struct {
		Type    string   `json:"type"`
		Command []string `json:"command"`
		Enabled bool     `json:"enabled"`
	}
	var opencode struct {
		MCP map[string]local `json:"mcp"`
	}
	decode(t, "opencode", &opencode)
	assert.Equal(t, map[string]local{"memory": {Type: "local", Command: []string{exe, "connect", "memory"}, Enabled: true}}, opencode.MCP)

	// Codex's is TOML, after its command line.
	var out bytes.Buffer
	client, err := editors.Lookup("codex")
	require.NoError(t, err)
	require.NoError(t, client.PrintStdio(&out, io.Discard, "memory", []string{exe, "connect", "memory"}))
	text := out.String()
	text = text[strings.Index(text, "[mcp_servers."):]
	var codex struct {
		MCPServers map[string]stdio `toml:"mcp_servers"`
	}
	dec := toml.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&codex), "codex snippet:\n%s", text)
	assert.Equal(t, map[string]stdio{"memory": {Command: exe, Args: []string{"connect", "memory"}}}, codex.MCPServers)
}

// TestClientLists checks the texts made from Clients: the usage, help and
// messages of client-config, and the editors doctor names.
func TestClientLists(t *testing.T) {
	assert.Equal(t, "claude|claude-desktop|cursor|vscode|codex|opencode|gemini|zed|windsurf|jetbrains", editors.ForChoices())
	assert.Equal(t, "claude, claude-desktop, cursor, vscode, codex, opencode, gemini, zed, windsurf or jetbrains", editors.ForValues())
	assert.Equal(t, `  --for claude          Claude Code: a "claude mcp add" command line, or .mcp.json
                        (with --http, .mcp.json only: no command line carries the token)
  --for claude-desktop  Claude Desktop's claude_desktop_config.json
  --for cursor          Cursor's mcp.json
  --for vscode          VS Code's mcp.json
  --for codex           Codex: a "codex mcp add" command line, or ~/.codex/config.toml
                        (with --http, config.toml only: no command line carries the token)
  --for opencode        opencode's opencode.json
  --for gemini          Gemini CLI's settings.json
  --for zed             Zed's settings.json
  --for windsurf        Windsurf's mcp_config.json
  --for jetbrains       JetBrains: Junie's mcp.json, or AI Assistant's MCP settings (Add > As JSON)`, editors.ForHelp())
	for _, tt := range []struct{ target, want, wantErr string }{
		{"claude", "Claude Code", ""},
		{"claude-code", "Claude Code", ""},
		{"claude-desktop", "Claude Desktop", ""},
		{"cursor", "Cursor", ""},
		{"vscode", "VS Code", ""},
		{"codex", "Codex", ""},
		{"opencode", "opencode", ""},
		{"gemini", "Gemini CLI", ""},
		{"zed", "Zed", ""},
		{"windsurf", "Windsurf", ""},
		{"jetbrains", "JetBrains", ""},
		{"", "", "missing --for: claude (Claude Code), claude-desktop, cursor, vscode, codex, opencode, gemini, zed, windsurf or jetbrains"},
		{"emacs", "", `--for "emacs": want claude (Claude Code), claude-desktop, cursor, vscode, codex, opencode, gemini, zed, windsurf or jetbrains`},
	} {
		c, err := editors.Lookup(tt.target)
		if tt.wantErr != "" {
			assert.EqualError(t, err, tt.wantErr, "--for %q", tt.target)
			continue
		}
		require.NoError(t, err, "--for %q", tt.target)
		assert.Equal(t, tt.want, c.Name, "--for %q", tt.target)
	}
}
