package socket

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestServerOf: the paths a name is served at, and /mcp for the endpoint
// every server is behind.
func TestServerOf(t *testing.T) {
	for path, want := range map[string]string{
		"/servers/demo":     "demo",
		"/servers/demo/mcp": "demo",
		"/servers/all":      "all",
		"/mcp":              AllName,
		"/mcp/":             "",
		"/servers/demo/x":   "",
		"/demo":             "",
	} {
		assert.Equal(t, want, serverOf(path), "path %s", path)
	}
}
