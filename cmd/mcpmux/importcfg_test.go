package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportCommand runs mcpmux import on a file: TOML on stdout, and
// errors that name the file.
func TestImportCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mcp.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"servers": {"a": {"command": "a-mcp"}}}`), 0o600))
	bad := filepath.Join(dir, "package.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"name": "x"}`), 0o600))

	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"a VS Code file", []string{"import", good}, "# mcpmux import " + good + " (VS Code servers): 1 server.\n" +
			"# Append to mux.toml; read the \"check:\" comments first.\n\n[servers.a]\ncommand = \"a-mcp\"\n", ""},
		{"not a server list", []string{"import", bad}, "", "import " + bad + ": no MCP servers found: expected"},
		{"missing", []string{"import", filepath.Join(dir, "nope.json")}, "", "import: open " + filepath.Join(dir, "nope.json") + ": no such file or directory"},
		{"no file", []string{"import"}, "", "accepts 1 arg(s), received 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := newRootCmd()
			root.SetArgs(tt.args)
			root.SetOut(&out)
			root.SetErr(&errOut)
			err := root.Execute()
			if tt.wantErr != "" {
				require.Error(t, err, "mcpmux %v", tt.args)
				assert.True(t, strings.HasPrefix(err.Error(), tt.wantErr), "mcpmux %v\nerror: %s\nwant:  %s...", tt.args, err, tt.wantErr)
				return
			}
			require.NoError(t, err, "mcpmux %v", tt.args)
			assert.Equal(t, tt.want, out.String(), "mcpmux %v", tt.args)
			assert.Empty(t, errOut.String(), "mcpmux %v", tt.args)
		})
	}
}
