package editors_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/editors"
)

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
			res, err := editors.Import([]byte(tt.file), "f.json", editors.Rules{})
			require.Error(t, err, "file:\n%s", tt.file)
			assert.Nil(t, res)
			assert.True(t, strings.HasPrefix(err.Error(), tt.wantErr), "file:\n%s\nerror: %s\nwant:  %s...", tt.file, err, tt.wantErr)
		})
	}
}
