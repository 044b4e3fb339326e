package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
)

// readmeBlock is the fenced code block that follows the marker
// <!-- readme-test: NAME --> in the README.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- readme-test: " + regexp.QuoteMeta(name) + " -->\n```[a-z]*\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "the README has a block marked readme-test: %s", name)
	return string(m[1])
}

// The README's annotated configuration example loads as it is written, on
// any machine: what depends on the machine is commented out.
func TestReadmeConfigExampleLoads(t *testing.T) {
	cfg, err := config.Parse([]byte(readmeBlock(t, "config-example")), "README.md", t.TempDir())
	require.NoError(t, err)
	var names []string
	for _, s := range cfg.Servers {
		names = append(names, s.Name())
	}
	assert.Equal(t, []string{"memory"}, names, "its servers")
	assert.Equal(t, []string{"-y", "@modelcontextprotocol/server-memory"}, cfg.Servers[0].Hub.Upstream.Args, "memory's args")
}
