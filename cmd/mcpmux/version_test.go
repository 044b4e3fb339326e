package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `mcpmux --version` and `mcpmux version` print the same line, with the
// version stamped at link time.
func TestVersionFlag(t *testing.T) {
	was := version
	version = "v9.8.7-test"
	t.Cleanup(func() { version = was })

	flag, err := runCLI(t.Context(), "--version")
	require.NoError(t, err)
	cmd, err := runCLI(t.Context(), "version")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(flag, "mcpmux v9.8.7-test ("), "--version prints the stamped version: %q", flag)
	assert.Equal(t, flag, cmd, "--version and version agree")
	assert.Equal(t, "v9.8.7-test", mcpmuxVersion(), "the short version status reports")
}
