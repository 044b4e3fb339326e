package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestRealWorldModernClientRoots: with roots = "sessions", the roots of a
// TypeScript SDK v2 client pinned to 2026-07-28 reach a legacy server that
// asks roots/list (the demo server's roots tool), over `mcpmux connect`
// and over Streamable HTTP: mcpmux asks the client for them once, as
// input_required on its first call, and keeps them for its next. Once the
// client has left, the server's roots/list no longer gets them.
func TestRealWorldModernClientRoots(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	d := startDaemon(t, demo("demo", nil, `roots = "sessions"`), rwListen)
	for _, tc := range []struct {
		kind   string
		target map[string]any
	}{
		{"connect", connectTarget(d, "demo")},
		{"http", httpTarget(d, "demo", rwToken, false)},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			root := "file:///modern/" + tc.kind
			var r struct {
				Era    string `json:"era"`
				First  string `json:"first"`
				Second string `json:"second"`
				Asked  int    `json:"asked"`
			}
			rw.runScript(t, "roots-v2.mjs", map[string]any{"target": tc.target, "root": root}, &r, nil)
			t.Logf("%s: era %s, the server's roots/list got %q then %q; the client was asked %d time(s)", tc.kind, r.Era, r.First, r.Second, r.Asked)
			assert.Equal(t, "modern", r.Era)
			assert.Equal(t, root, r.First, "the server's roots/list gets the client's root")
			assert.Equal(t, root, r.Second)
			assert.Equal(t, 1, r.Asked, "the client is asked for its roots once")

			// A legacy client without roots: the server's roots/list now
			// gets no roots, once the modern client's session has ended.
			c := open(t, d.socket("demo"))
			defer c.close()
			var got string
			took := testutil.Eventually(t, 5*time.Second, "the modern client's root gone from roots/list", func() (bool, error) {
				m, err := c.tool(`"roots"`, "roots", nil)
				if err != nil {
					return false, err
				}
				got, err = resultText(m)
				return err == nil && !strings.Contains(got, root), err
			})
			require.Empty(t, got)
			t.Logf("%s: roots/list empty %v after the client left", tc.kind, took.Round(time.Millisecond))
		})
	}
}
