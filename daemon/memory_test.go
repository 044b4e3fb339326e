package daemon

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/upstream"
)

// TestStartKeyEra: the same command opened in another era is remembered
// apart (a server of both eras describes itself per era); "auto" keeps the
// key the command alone gives.
func TestStartKeyEra(t *testing.T) {
	base := mux.Config{Upstream: upstream.Config{Command: "/bin/server", Args: []string{"-x"}}}
	auto := base
	auto.Protocol = "auto"
	modern := base
	modern.Protocol = "modern"
	legacy := base
	legacy.Protocol = "legacy"
	assert.Equal(t, startKey(base), startKey(auto))
	assert.NotEqual(t, startKey(base), startKey(modern))
	assert.NotEqual(t, startKey(base), startKey(legacy))
	assert.NotEqual(t, startKey(modern), startKey(legacy))
}
