package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shell's completion (through cobra's __complete, as the scripts of
// `mcpmux completion` call it) offers the configured server names to the
// commands that take one, and the editors to client-config --for.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mux.toml")
	require.NoError(t, os.WriteFile(path, []byte(`[servers.memory]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-memory"]

[servers.files]
command = "mcp-files"
cwd = "/no/such/folder"   # the config does not load; its names still complete

[servers.mail]
command = "mail-mcp"
`), 0o600))
	const noFiles = ":4\n" // ShellCompDirectiveNoFileComp
	all := "files\tmcp-files\nmail\tmail-mcp\nmemory\tnpx -y @modelcontextprotocol/server-memory\n" + noFiles
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"connect", "--config", path, ""}, all},
		{[]string{"restart", "--config", path, "m"}, "mail\tmail-mcp\nmemory\tnpx -y @modelcontextprotocol/server-memory\n" + noFiles},
		{[]string{"logs", "--config", path, "mem"}, "memory\tnpx -y @modelcontextprotocol/server-memory\n" + noFiles},
		{[]string{"client-config", "--config", path, ""}, all},
		{[]string{"connect", "--config", path, "memory", ""}, noFiles},
		{[]string{"connect", "--config", filepath.Join(dir, "none.toml"), ""}, noFiles},
		{[]string{"client-config", "memory", "--for", ""}, "claude\tClaude Code\nclaude-desktop\tClaude Desktop\ncodex\tCodex\ncursor\tCursor\ngemini\tGemini CLI\njetbrains\tJetBrains\nopencode\topencode\nvscode\tVS Code\nwindsurf\tWindsurf\nzed\tZed\n" + noFiles},
		{[]string{"client-config", "memory", "--for", "c"}, "claude\tClaude Code\nclaude-desktop\tClaude Desktop\ncodex\tCodex\ncursor\tCursor\n" + noFiles},
	} {
		out, err := runCLIOut(t, append([]string{"__complete"}, tc.args...)...)
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.want, out, "__complete %q", tc.args)
	}
}

// runCLIOut runs one mcpmux command in-process and returns its stdout
// alone.
func runCLIOut(t *testing.T, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// A shell without a script is refused, naming the ones there are.
func TestCompletionUnknownShell(t *testing.T) {
	_, err := runCLIOut(t, "completion", "tcsh")
	require.Error(t, err)
	assert.Equal(t, `no completion for the shell "tcsh": mcpmux has scripts for bash, fish, powershell, zsh`, err.Error())
}
