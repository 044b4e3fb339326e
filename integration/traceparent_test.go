package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// tappedServer is a [servers.NAME] table running argv behind ./eratap,
// which logs what the server receives to log.
func tappedServer(name, tap, log string, argv []string, extra string) string {
	args := []string{fmt.Sprintf("%q", log)}
	for _, a := range argv {
		args = append(args, fmt.Sprintf("%q", a))
	}
	return fmt.Sprintf("[servers.%s]\ncommand = %q\nargs = [%s]\ninherit_env = [\"GORACE\"]\n%s\n\n", name, tap, strings.Join(args, ", "), extra)
}

// traceMeta is the trace context a cell's request carries.
type traceMeta struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate"`
}

// TestTraceparentReachesTheServerUnchanged: the W3C trace context a client
// puts in params._meta reaches the server as it was sent, for sessions of
// both eras on servers of both eras: the same era, and both bridges (a
// 2026-07-28 session on a legacy server, a legacy session on a 2026-07-28
// server). The servers' side of the wire is read from ./eratap's log.
func TestTraceparentReachesTheServerUnchanged(t *testing.T) {
	probe, tap, err := eraBuild()
	require.NoError(t, err)
	logs := map[string]string{"old": filepath.Join(t.TempDir(), "old.log"), "new": filepath.Join(t.TempDir(), "new.log")}
	d := startDaemon(t,
		tappedServer("old", tap, logs["old"], []string{bins.demoserver}, `protocol = "legacy"`)+
			tappedServer("new", tap, logs["new"], []string{probe}, `protocol = "modern"`), "")

	cells := []struct{ server, session string }{
		{"old", eraLegacy}, {"old", eraModern}, // same era; modern client -> legacy server
		{"new", eraModern}, {"new", eraLegacy}, // same era; legacy client -> modern server
	}
	for i, cell := range cells {
		t.Run(cell.session+" session on the "+cell.server+" server", func(t *testing.T) {
			want := traceMeta{
				Traceparent: fmt.Sprintf("00-%032x-%016x-01", 0xabc0+i, 0xdef0+i),
				Tracestate:  fmt.Sprintf("mcpmux=cell%d,congo=t61rcWkgMzE", i),
			}
			meta := map[string]any{"traceparent": want.Traceparent, "tracestate": want.Tracestate}
			c := dial(t, d.socket(cell.server))
			if cell.session == eraLegacy {
				_, err := c.initialize(eraLegacyVersion)
				require.NoError(t, err)
			} else {
				maps.Copy(meta, modernMeta)
			}
			params := map[string]any{"name": "echo", "arguments": map[string]any{"text": "traced"}, "_meta": meta}
			m, err := c.call(`"traced"`, "tools/call", params)
			require.NoError(t, err)
			require.Equal(t, jsonrpc.KindResult, m.Kind, "the traced call is answered: %s", m.Frame)

			var got []traceMeta
			testutil.Eventually(t, readyTimeout, "the server's tap logs the call", func() (bool, error) {
				got = got[:0]
				for _, h := range readTap(t, logs[cell.server], 0) {
					for _, msg := range h.msgs {
						var p struct {
							Meta traceMeta `json:"_meta"`
						}
						json.Unmarshal(msg.Params, &p)
						if msg.Out && msg.Method == "tools/call" && p.Meta.Tracestate == want.Tracestate {
							got = append(got, p.Meta)
						}
					}
				}
				return len(got) > 0, nil
			})
			require.Equal(t, []traceMeta{want}, got, "the server received the trace context unchanged, once")
		})
	}
	// The servers were opened in the eras the cells' names say.
	for name, era := range map[string]string{"old": eraLegacy, "new": eraModern} {
		hops := readTap(t, logs[name], 0)
		require.NotEmpty(t, hops, "server %s ran", name)
		for _, h := range hops {
			assert.Equal(t, era, eraViewOf(h.msgs).era(), "server %s was opened %s", name, era)
		}
	}
}
