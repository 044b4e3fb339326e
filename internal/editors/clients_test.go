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
	{"gemini-settings.json", ".gemini/settings.json", "gemini-settings.toml"},
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
