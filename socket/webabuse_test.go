package socket_test

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// TestWebOAuthDiscoveryQuiet: the paths OAuth clients probe get a 404
// with a JSON-RPC body, token or not, and no warning.
func TestWebOAuthDiscoveryQuiet(t *testing.T) {
	ws := startWeb(t, nil)
	base := "http" + strings.TrimPrefix(ws.url, "ws")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{
		"/.well-known/oauth-protected-resource",
		"/.well-known/oauth-protected-resource/servers/demo",
		"/.well-known/oauth-authorization-server",
		"/.well-known/oauth-authorization-server/servers/demo/mcp",
		"/.well-known/openid-configuration",
		"/servers/demo/.well-known/openid-configuration",
	} {
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		reason, _ := refusalBody(t, resp)
		assert.Equal(t, "not_supported", reason, path)
		resp.Body.Close()
	}
	for _, r := range ws.log.Records() {
		assert.Less(t, r.Level, slog.LevelWarn, "nothing logged at Warn: %v", r)
	}
}

// TestWebRefusalLogLimited: a flood of refusals from one peer logs one
// line (then, later, a count), and what the client sent is cut short.
func TestWebRefusalLogLimited(t *testing.T) {
	ws := startWeb(t, nil)
	base := "http" + strings.TrimPrefix(ws.url, "ws")
	client := &http.Client{Transport: &http.Transport{}}
	host := strings.Repeat("h", 60<<10)
	for range 50 {
		req, err := http.NewRequest("POST", base+"/servers/demo", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := client.Do(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		resp.Body.Close()
	}
	var refused []string
	for _, r := range ws.log.Records() {
		if strings.HasPrefix(r.Msg, "refused a web request") {
			h, _ := r.Attrs["host"].(string)
			refused = append(refused, h)
		}
	}
	require.Len(t, refused, 1, "one line for the flood")
	assert.Less(t, len(refused[0]), 200, "the Host is cut short")
	assert.Contains(t, refused[0], "(61440 bytes)")
}

// TestWebConnectionCap: beyond MaxConnections a connection is not served
// until another closes.
func TestWebConnectionCap(t *testing.T) {
	ws := startWeb(t, func(c *socket.WebConfig) { c.MaxConnections = 2 })
	addr := strings.TrimPrefix(ws.url, "ws://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		held = append(held, c)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 500 * time.Millisecond}
	_, err := client.Get("http://" + addr + "/servers/demo")
	require.Error(t, err, "a third connection waits")
	held[0].Close()
	client.Timeout = 10 * time.Second
	testutil.Until(t, 10*time.Second, "served once one closed", func() bool {
		resp, err := client.Get("http://" + addr + "/servers/demo")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUpgradeRequired || resp.StatusCode == http.StatusUnauthorized
	})
}
