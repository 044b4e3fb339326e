package integration

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestWebRefusalFloodLogBounded: 3,000 refused requests with a 60 KB Host
// grow the daemon's log by less than 1 MB: one line per kind of refusal
// and peer, then a count, with the Host cut short.
func TestWebRefusalFloodLogBounded(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	url := "http://" + d.webAddr() + "/servers/demo"
	before := len(d.log())
	host := strings.Repeat("h", 60_000)
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: ioTimeout}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for range 375 {
				req, _ := http.NewRequest("POST", url, nil)
				req.Host = host
				resp, err := hc.Do(req)
				code := 0
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	assert.Equal(t, map[int]int{http.StatusForbidden: 3000}, statuses)
	// The count comes when the limiter's interval ends.
	testutil.Eventually(t, 30*time.Second, "the refusals are counted in the log", func() (bool, error) {
		return strings.Contains(d.log()[before:], "suppressed="), nil
	})
	grown := len(d.log()) - before
	t.Logf("3,000 refusals with a 60 KB Host in %v grew the log by %d bytes", elapsed.Round(time.Millisecond), grown)
	assert.Less(t, grown, 1<<20, "the log's growth")
}

// TestLeakedHTTPSessionsLeaveSocketAdmitted: 1,100 HTTP sessions that are
// never deleted stay within max_http_sessions (the idlest evicted), so a
// socket session is still admitted.
func TestLeakedHTTPSessionsLeaveSocketAdmitted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	c := newHTTPClient(t, d, "demo")
	init := string(request("0", "initialize", map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "leak", "version": "1"},
	}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 4 {
		wg.Go(func() {
			for range 275 {
				code := 0
				req, _ := http.NewRequest("POST", c.url, strings.NewReader(init))
				req.Header.Set("Authorization", "Bearer "+wsToken)
				req.Header.Set("Accept", "application/json, text/event-stream")
				if resp, err := c.hc.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, map[int]int{http.StatusOK: 1100}, statuses, "every initialize is served")
	sock := open(t, d.socket("demo"))
	require.NoError(t, sock.echo("1", "admitted"), "a socket session after 1,100 leaked HTTP sessions")
	assert.Contains(t, d.log(), "evicted the idlest HTTP session")
}

// TestHTTPHugeAnswersLeaveMemoryFlat: an HTTP session that receives
// seventeen 15 MB answers, and reads each, leaves the daemon under 200 MiB
// once they are read: delivered answers are not kept beyond the replay
// bounds.
func TestHTTPHugeAnswersLeaveMemoryFlat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the daemon's memory from /proc")
	}
	d := startDaemon(t, demo("demo", nil), wsListen)
	c := newHTTPClient(t, d, "demo")
	sid := c.initialize(t)
	watch := watchRSS(d.cmd.Process.Pid)
	for i := range 17 {
		resp := c.do(t, "POST", string(toolCall(fmt.Sprint(i+1), "huge", map[string]any{"bytes": 15_000_000})),
			"Mcp-Session-Id: "+sid, "MCP-Protocol-Version: 2025-06-18")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		n, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.Greater(t, n, int64(15_000_000), "answer %d read whole", i+1)
		resp.Body.Close()
	}
	peak := watch.end()
	// The race detector's shadow memory stays resident once touched (about
	// four times what the heap touched): under -race the bound is looser,
	// still well under what the 255 MB of answers would take if kept.
	bound := int64(200 << 20)
	if raceEnabled {
		bound = 600 << 20
	}
	var after int64
	testutil.Eventually(t, 30*time.Second, "the daemon's resident set falls under the bound", func() (bool, error) {
		n, err := residentBytes(d.cmd.Process.Pid)
		after = n
		return err == nil && n < bound, err
	})
	t.Logf("seventeen 15 MB answers: daemon peak RSS %.1f MiB, %.1f MiB once read (race detector: %v)",
		float64(peak)/(1<<20), float64(after)/(1<<20), raceEnabled)
	assert.Less(t, after, bound)
}

// TestOAuthDiscoveryQuiet: the probes mcp-remote and other OAuth clients
// send before they connect get a 404 with a JSON-RPC body, and the log no
// warning.
func TestOAuthDiscoveryQuiet(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	base := "http://" + d.webAddr()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: ioTimeout}
	for _, path := range []string{
		"/.well-known/oauth-protected-resource/servers/demo",
		"/.well-known/oauth-authorization-server",
		"/.well-known/openid-configuration",
		"/servers/demo/.well-known/oauth-protected-resource",
	} {
		resp, err := hc.Get(base + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), path)
		assert.Contains(t, string(body), `"reason":"not_supported"`, path)
	}
	assert.NotContains(t, d.log(), "level=WARN", "no warning for the probes")
}
