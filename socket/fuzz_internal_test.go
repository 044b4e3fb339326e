//go:build unix

package socket

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzWebChecks feeds the web listener's path and header checks any path,
// Host and Origin: a path names a server only under /servers/ (or is /mcp),
// never with a slash in the name, and an Origin is allowed only when there
// is none, it is the listener's own loopback one, or it is listed.
func FuzzWebChecks(f *testing.F) {
	for _, s := range []struct{ path, host, origin string }{
		{"/servers/memory", "127.0.0.1:7878", ""},
		{"/servers/memory/mcp", "localhost:7878", "http://localhost:7878"},
		{"/mcp", "[::1]:7878", "http://evil.example"},
		{"/servers//x", "evil.example", "http://127.0.0.1:7878/"},
		{"/servers/a/b", "127.0.0.1", "https://app.example"},
	} {
		f.Add(s.path, s.host, s.origin)
	}
	w := &Web{cfg: WebConfig{Origins: []string{"https://app.example"}}}
	f.Fuzz(func(t *testing.T, path, host, origin string) {
		if name := serverOf(path); name != "" {
			if path != AllPath && !strings.HasPrefix(path, ServersPath) {
				t.Fatalf("serverOf(%q) = %q outside %s", path, name, ServersPath)
			}
			if strings.Contains(name, "/") {
				t.Fatalf("serverOf(%q) = %q holds a slash", path, name)
			}
		}
		isLoopbackHost(hostOnly(host))
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		got := r.Header.Get("Origin")
		if !w.originAllowed(r) || got == "" {
			return
		}
		o := strings.TrimSuffix(got, "/")
		if !strings.EqualFold(o, "https://app.example") && !isLoopbackHost(hostOnly(strings.TrimPrefix(o, "http://"))) {
			t.Fatalf("Origin %q allowed for Host %q", got, host)
		}
	})
}
