package editors_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

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
}

// TestClientLists checks the texts made from Clients: the usage, help and
// messages of client-config, and the editors doctor names.
func TestClientLists(t *testing.T) {
	assert.Equal(t, "claude|claude-desktop|cursor|vscode|gemini|windsurf|jetbrains", editors.ForChoices())
	assert.Equal(t, "claude, claude-desktop, cursor, vscode, gemini, windsurf or jetbrains", editors.ForValues())
	assert.Equal(t, `  --for claude          Claude Code: a "claude mcp add" command line, or .mcp.json
                        (with --http, .mcp.json only: no command line carries the token)
  --for claude-desktop  Claude Desktop's claude_desktop_config.json
  --for cursor          Cursor's mcp.json
  --for vscode          VS Code's mcp.json
  --for gemini          Gemini CLI's settings.json
  --for windsurf        Windsurf's mcp_config.json
  --for jetbrains       JetBrains: Junie's mcp.json, or AI Assistant's MCP settings (Add > As JSON)`, editors.ForHelp())
	for _, tt := range []struct{ target, want, wantErr string }{
		{"claude", "Claude Code", ""},
		{"claude-code", "Claude Code", ""},
		{"claude-desktop", "Claude Desktop", ""},
		{"cursor", "Cursor", ""},
		{"vscode", "VS Code", ""},
		{"gemini", "Gemini CLI", ""},
		{"windsurf", "Windsurf", ""},
		{"jetbrains", "JetBrains", ""},
		{"", "", "missing --for: claude (Claude Code), claude-desktop, cursor, vscode, gemini, windsurf or jetbrains"},
		{"emacs", "", `--for "emacs": want claude (Claude Code), claude-desktop, cursor, vscode, gemini, windsurf or jetbrains`},
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
