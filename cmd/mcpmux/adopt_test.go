package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestAdoptCommand: --dry-run prints the diffs and writes nothing; adopt
// writes mux.toml and the editors' files, each backed up; --undo puts
// every file back exactly.
func TestAdoptCommand(t *testing.T) {
	home := t.TempDir()
	files := map[string]string{
		"dotfiles/cursor-mcp.json":  "{\n  \"mcpServers\": {\n    \"memory\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-memory\"]}\n  }\n}\n",
		".config/zed/settings.json": "// Zed\n{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n    \"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\"]},\n  },\n}\n",
		".config/mcpmux/mux.toml":   "[servers.fetch]\ncommand = \"uvx\"\nargs = [\"mcp-server-fetch\"]\n",
	}
	testutil.WriteTree(t, home, files)
	run := adoptRunner(t, home)
	cursor := filepath.Join(home, ".cursor", "mcp.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(cursor), 0o700))
	require.NoError(t, os.Symlink(filepath.Join(home, "dotfiles", "cursor-mcp.json"), cursor), "a dotfile kept elsewhere")
	before := testutil.HashTree(t, home)
	out := run("--dry-run")
	assert.Equal(t, before, testutil.HashTree(t, home), "--dry-run writes nothing")
	assert.Contains(t, out, "through mcpmux: Cursor ~/.cursor/mcp.json: memory, as one entry \"mcpmux\" (the endpoint cursor)\n")
	assert.Contains(t, out, "through mcpmux: Zed ~/.config/zed/settings.json: time, as one entry \"mcpmux\" (the endpoint zed)\n")
	assert.Contains(t, out, "new endpoint: cursor (memory)\nnew endpoint: zed (time)\n")
	assert.Contains(t, out, "--- "+cursor+"\n+++ "+cursor+"\n@@ -3,1 +3,1 @@\n"+
		`-    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}`+"\n"+
		`+    "mcpmux": {"command":"/opt/bin/mcpmux","args":["connect","cursor"]}`+"\n")
	assert.Contains(t, out, "+# max_concurrency = 1: server-memory")
	assert.Contains(t, out, "+[endpoints.cursor]\n+servers = [\"memory\"]\n")

	out = run()
	assert.Contains(t, out, "wrote 3 files, each backed up beside itself (FILE.mcpmux-backup)")
	now, err := os.ReadFile(filepath.Join(home, ".config", "zed", "settings.json"))
	require.NoError(t, err)
	assert.Equal(t, "// Zed\n{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n    \"mcpmux\": {\"command\":\"/opt/bin/mcpmux\",\"args\":[\"connect\",\"zed\"]},\n  },\n}\n", string(now))
	cfg, err := os.ReadFile(filepath.Join(home, ".config", "mcpmux", "mux.toml"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(cfg), files[".config/mcpmux/mux.toml"]), "mux.toml keeps what it had:\n%s", cfg)
	assert.Contains(t, string(cfg), "[servers.memory]\ncommand = \"npx\"")
	assert.Contains(t, string(cfg), "[endpoints.zed]\nservers = [\"time\"]\n")
	assert.Contains(t, run(), "nothing to adopt", "a second adopt finds every entry through mcpmux")
	link, err := os.Readlink(cursor)
	require.NoError(t, err, "the link stays a link")
	assert.Equal(t, filepath.Join(home, "dotfiles", "cursor-mcp.json"), link)
	target, err := os.ReadFile(link)
	require.NoError(t, err)
	assert.Contains(t, string(target), `"mcpmux": {"command":"/opt/bin/mcpmux","args":["connect","cursor"]}`, "its target is rewritten")

	out = run("--undo")
	assert.Contains(t, out, "restored "+cursor+"\n")
	assert.Equal(t, before, testutil.HashTree(t, home), "--undo puts every file back, and no backup stays")
	_, err = os.Readlink(cursor)
	assert.NoError(t, err, "the link is still a link")
	assert.Contains(t, run("--undo"), "no backups (FILE.mcpmux-backup) to put back")
}

// TestAdoptStartsNewServers: with a daemon serving the config, adopt has
// it start the new servers and says when each is ready.
func TestAdoptStartsNewServers(t *testing.T) {
	dir := testutil.ShortDir(t)
	path := filepath.Join(dir, "mux.toml")
	require.NoError(t, os.WriteFile(path, []byte("[listen]\nsocket_dir = \"s\"\n"), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	served, _, cancel := serveInBackground(t, cfg, daemonEnv{environ: []string{"PATH=/usr/bin:/bin"}})
	defer func() {
		cancel()
		<-served
	}()
	testutil.Eventually(t, 10*time.Second, "the daemon answers", func() (bool, error) {
		_, err := daemon.NewClient(filepath.Join(dir, "s")).Status(t.Context())
		return err == nil, nil
	})

	exe, err := os.Executable()
	require.NoError(t, err)
	entry, err := json.Marshal(map[string]any{"command": exe, "env": map[string]string{testutil.FakeServerEnv: "serve"}})
	require.NoError(t, err)
	home := filepath.Join(dir, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".cursor"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".cursor", "mcp.json"), []byte(`{"mcpServers": {"fake": `+string(entry)+`}}`), 0o600))

	var out bytes.Buffer
	cmd := newAdoptCmdWith(adoptEnv{setupEnv: fakeSetupEnv(t, map[string]string{"HOME": home}, "/opt/bin/mcpmux"), cwd: home})
	cmd.SetArgs([]string{"--config", path})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	require.NoError(t, cmd.ExecuteContext(t.Context()))
	assert.Contains(t, out.String(), "new server: fake\n")
	assert.Contains(t, out.String(), "starting in the daemon: fake\n")
	assert.Regexp(t, `ready: fake \(\d+s\)\n`, out.String())
	cursor, err := os.ReadFile(filepath.Join(home, ".cursor", "mcp.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"mcpServers": {"mcpmux": {"command":"/opt/bin/mcpmux","args":["connect","--config",`+strconv.Quote(path)+`]}}}`, string(cursor),
		"its only server is every server: the endpoint all")
}

// TestAdoptCreatesConfig: with no mux.toml, adopt writes one, and --undo
// takes it away again with the rest, even after a second adopt.
func TestAdoptCreatesConfig(t *testing.T) {
	home := t.TempDir()
	claude := filepath.Join(home, ".claude.json")
	text := `{"numStartups": 3, "projects": {"/src/app": {"allowedTools": [], "mcpServers": {"db": {"type": "stdio", "command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "app.db"]}}}}}`
	require.NoError(t, os.WriteFile(claude, []byte(text), 0o600))
	run := adoptRunner(t, home)
	before := testutil.HashTree(t, home)
	out := run()
	assert.Contains(t, out, "through mcpmux: Claude Code ~/.claude.json (project /src/app): db, as one entry \"mcpmux-app\" (the endpoint all)\n")
	cfg, err := os.ReadFile(filepath.Join(home, ".config", "mcpmux", "mux.toml"))
	require.NoError(t, err)
	assert.Contains(t, string(cfg), "[servers.db]\ncommand = \"uvx\"\nargs = [\"mcp-server-sqlite\", \"--db-path\", \"app.db\"]\nshare = \"project\"\n")
	now, err := os.ReadFile(claude)
	require.NoError(t, err)
	assert.Equal(t, `{"numStartups": 3, "projects": {"/src/app": {"allowedTools": [], "mcpServers": {"mcpmux-app": {"command":"/opt/bin/mcpmux","args":["connect"]}}}}}`, string(now),
		"a project's entry does not take the name of the user's, mcpmux, which it would hide")

	// Another server since: adopt again, then undo both.
	cursor := filepath.Join(home, ".cursor", "mcp.json")
	cursorText := `{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}`
	require.NoError(t, os.MkdirAll(filepath.Dir(cursor), 0o700))
	require.NoError(t, os.WriteFile(cursor, []byte(cursorText), 0o600))
	assert.Contains(t, run(), "new server: time\nnew endpoint: cursor (time)\n")
	run("--undo")
	assert.NoFileExists(t, filepath.Join(home, ".config", "mcpmux", "mux.toml"))
	data, err := os.ReadFile(cursor)
	require.NoError(t, err)
	assert.Equal(t, cursorText, string(data))
	require.NoError(t, os.RemoveAll(filepath.Dir(cursor)))
	assert.Equal(t, before, testutil.HashTree(t, home), "--undo leaves no mux.toml, no backup, no mark")
}

// adoptRunner runs adopt with args in home (from a folder elsewhere), as
// /opt/bin/mcpmux, and returns what it printed; it fails the test if adopt
// fails.
func adoptRunner(t *testing.T, home string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := newAdoptCmdWith(adoptEnv{setupEnv: fakeSetupEnv(t, map[string]string{"HOME": home}, "/opt/bin/mcpmux"), cwd: filepath.Join(home, "elsewhere")})
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		require.NoError(t, cmd.Execute(), "adopt %v", args)
		return out.String()
	}
}
