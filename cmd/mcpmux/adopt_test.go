package main

import (
	"bytes"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hashTree hashes every file under dir, with its path.
func hashTree(t *testing.T, dir string) [32]byte {
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		h.Write([]byte(p + "\x00"))
		h.Write(data)
		return err
	}))
	return [32]byte(h.Sum(nil))
}

// TestAdoptCommand: --dry-run prints the diffs and writes nothing; adopt
// writes mux.toml and the editors' files, each backed up; --undo puts
// every file back exactly.
func TestAdoptCommand(t *testing.T) {
	home := t.TempDir()
	files := map[string]string{
		".cursor/mcp.json":          "{\n  \"mcpServers\": {\n    \"memory\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-memory\"]}\n  }\n}\n",
		".config/zed/settings.json": "// Zed\n{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n    \"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\"]},\n  },\n}\n",
		".config/mcpmux/mux.toml":   "[servers.fetch]\ncommand = \"uvx\"\nargs = [\"mcp-server-fetch\"]\n",
	}
	for p, text := range files {
		path := filepath.Join(home, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	}
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := newAdoptCmdWith(adoptEnv{setupEnv: fakeSetupEnv(t, map[string]string{"HOME": home}, "/opt/bin/mcpmux"), cwd: filepath.Join(home, "elsewhere")})
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		require.NoError(t, cmd.Execute(), "adopt %v", args)
		return out.String()
	}
	before := hashTree(t, home)
	out := run("--dry-run")
	assert.Equal(t, before, hashTree(t, home), "--dry-run writes nothing")
	cursor := filepath.Join(home, ".cursor", "mcp.json")
	assert.Contains(t, out, "through mcpmux: Cursor ~/.cursor/mcp.json: memory\n")
	assert.Contains(t, out, "through mcpmux: Zed ~/.config/zed/settings.json: time\n")
	assert.Contains(t, out, "--- "+cursor+"\n+++ "+cursor+"\n@@ -3,1 +3,1 @@\n"+
		`-    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}`+"\n"+
		`+    "memory": {"command":"/opt/bin/mcpmux","args":["connect","memory"]}`+"\n")
	assert.Contains(t, out, "+# max_concurrency = 1: server-memory")

	out = run()
	assert.Contains(t, out, "wrote 3 files, each backed up beside itself (FILE.mcpmux-backup)")
	now, err := os.ReadFile(filepath.Join(home, ".config", "zed", "settings.json"))
	require.NoError(t, err)
	assert.Equal(t, "// Zed\n{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n    \"time\": {\"command\":\"/opt/bin/mcpmux\",\"args\":[\"connect\",\"time\"]},\n  },\n}\n", string(now))
	cfg, err := os.ReadFile(filepath.Join(home, ".config", "mcpmux", "mux.toml"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(cfg), files[".config/mcpmux/mux.toml"]), "mux.toml keeps what it had:\n%s", cfg)
	assert.Contains(t, string(cfg), "[servers.memory]\ncommand = \"npx\"")
	assert.Contains(t, run(), "nothing to adopt", "a second adopt finds every entry through mcpmux")

	out = run("--undo")
	assert.Contains(t, out, "restored "+cursor+"\n")
	assert.Equal(t, before, hashTree(t, home), "--undo puts every file back, and no backup stays")
	assert.Contains(t, run("--undo"), "no backups (FILE.mcpmux-backup) to put back")
}
