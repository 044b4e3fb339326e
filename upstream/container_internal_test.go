//go:build unix

package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunIndex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command string
		args    string
		want    int
	}{
		{"docker", "run -i --rm img", 0},
		{"/usr/bin/docker", "run -i img", 0},
		{"podman", "run -i img", 0},
		{"docker", "--context remote run -i img", 2},
		{"docker", "-H unix:///x.sock --debug run img", 3},
		{"docker", "--log-level=debug run img", 1},
		{"docker", "container run -i img", 1},
		{"docker", "exec -i box server", -1},
		{"docker", "compose run svc", -1},
		{"docker", "", -1},
		{"npx", "run something", -1},
		{"dockerish", "run img", -1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, runIndex(tt.command, strings.Fields(tt.args)), "%s %s", tt.command, tt.args)
	}
}

func TestPrepareContainerAddsACidfile(t *testing.T) {
	t.Parallel()
	cfg := Config{Command: "docker", Args: []string{"--context", "x", "run", "-i", "--rm", "img", "serve"}}
	args, c, err := prepareContainer(cfg, "/usr/bin/docker", []string{"PATH=/usr/bin"})
	require.NoError(t, err)
	require.NotNil(t, c)
	t.Cleanup(c.cleanup)
	assert.Equal(t, []string{"--context", "x", "run", "--cidfile=" + c.cidfile, "-i", "--rm", "img", "serve"}, args)
	assert.Equal(t, "/usr/bin/docker", c.engine)
	fi, err := os.Stat(filepath.Dir(c.cidfile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the id file's folder is private")
	_, err = os.Stat(c.cidfile)
	assert.True(t, os.IsNotExist(err), "docker refuses a --cidfile that exists")
	assert.Empty(t, c.id(), "no id before the engine writes one")
	require.NoError(t, os.WriteFile(c.cidfile, []byte("abc123\n"), 0o600))
	assert.Equal(t, "abc123", c.id())
	c.cleanup()
	_, err = os.Stat(filepath.Dir(c.cidfile))
	assert.True(t, os.IsNotExist(err), "cleanup removes the folder")
}

func TestPrepareContainerKeepsTheCommandsCidfile(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"run", "--cidfile=box.cid", "-i", "img"},
		{"run", "-i", "--cidfile", "box.cid", "img"},
	} {
		cfg := Config{Command: "podman", Args: args, Dir: "/srv"}
		got, c, err := prepareContainer(cfg, "/usr/bin/podman", nil)
		require.NoError(t, err)
		require.NotNil(t, c)
		assert.Equal(t, cfg.Args, got)
		assert.Equal(t, "/srv/box.cid", c.cidfile, "relative to the server's folder")
		assert.Empty(t, c.ownDir, "not ours to remove")
	}
}

func TestPrepareContainerLeavesOtherCommands(t *testing.T) {
	t.Parallel()
	cfg := Config{Command: "uvx", Args: []string{"run", "x"}}
	args, c, err := prepareContainer(cfg, "/usr/bin/uvx", nil)
	require.NoError(t, err)
	assert.Nil(t, c)
	assert.Equal(t, cfg.Args, args)
}

func TestReaperArgsCarryTheContainer(t *testing.T) {
	t.Parallel()
	c := &container{engine: "/usr/bin/docker", cidfile: "/tmp/d/cid", ownDir: "/tmp/d"}
	args := append([]string{"42"}, c.reaperArgs()...)
	args = append(args, "--", "/usr/bin/docker", "docker", "run", "img")
	parent, got, path, argv, err := parseReaperArgs(args)
	require.NoError(t, err)
	assert.Equal(t, 42, parent)
	require.NotNil(t, got)
	assert.Equal(t, [3]string{c.engine, c.cidfile, c.ownDir}, [3]string{got.engine, got.cidfile, got.ownDir})
	assert.Equal(t, "/usr/bin/docker", path)
	assert.Equal(t, []string{"docker", "run", "img"}, argv)

	_, got, _, _, err = parseReaperArgs([]string{"42", "--", "/bin/true", "true"})
	require.NoError(t, err)
	assert.Nil(t, got, "no container")
}
