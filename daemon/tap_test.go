package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
)

// TestPrintTap: the daemon's tap lines are printed as they are with
// --json and as text otherwise, and a line that is not JSON is an error.
func TestPrintTap(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local).Format(time.RFC3339Nano)
	lines := `{"time":"` + at + `","server":"demo","session":3,"dir":"up","kind":"request","method":"tools/call","id":7,"upstream_id":12,"bytes":90,"shape":"{name:\"echo\"}"}` + "\n" +
		`{"time":"` + at + `","lost":4}` + "\n"

	var asJSON strings.Builder
	require.ErrorIs(t, daemon.PrintTap(&asJSON, strings.NewReader(lines), true), daemon.ErrTapEnded)
	assert.Equal(t, lines, asJSON.String(), "--json passes the lines through")

	var text strings.Builder
	require.ErrorIs(t, daemon.PrintTap(&text, strings.NewReader(lines), false), daemon.ErrTapEnded, "the stream ended")
	assert.Equal(t, "03:04:05.000 demo #3 -> tools/call id 7 (up 12) 90B {name:\"echo\"}\n03:04:05.000 ... 4 lines lost (the tap fell behind)\n", text.String())

	err := daemon.PrintTap(&text, strings.NewReader("not json\n"), false)
	assert.ErrorContains(t, err, "not JSON")
}

func TestTapQueryString(t *testing.T) {
	assert.Equal(t, "every server, redacted (--full shows whole messages)", daemon.TapQuery{}.String())
	assert.Equal(t, "a, b, session 7 only, whole messages", daemon.TapQuery{Servers: []string{"a", "b"}, Session: 7, Full: true}.String())
}
