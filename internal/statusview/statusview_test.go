package statusview

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/mux"
)

// fields is each line with its runs of spaces made one.
func fields(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return lines
}

// The table: a head line naming the config, then a line a server with
// its era; -v lists each session with its protocol.
func TestTableShowsEras(t *testing.T) {
	st := daemon.Status{Version: "v1", Config: "/etc/mux.toml", Pid: 7, Uptime: "1m", Servers: []mux.Status{
		{Name: "modern", State: mux.StateReady, Pid: 10, Uptime: "1m", Protocol: "2026-07-28", Era: "modern", Sessions: 2,
			SessionList: []mux.SessionStatus{
				{ID: 1, Transport: "unix", Client: "claude", Protocol: "2025-06-18", Era: "legacy", Age: "5s"},
				{ID: 2, Transport: "http", Peer: "127.0.0.1:5000", Client: "go", Protocol: "2026-07-28", Era: "modern", Age: "1s", Inflight: 1},
			}},
		{Name: "idle", State: mux.StateIdle},
		{Name: "slow", State: mux.StateStarting, StartingFor: "12s", Pid: 11},
	}}
	var out bytes.Buffer
	require.NoError(t, Table(&out, st, 0))
	require.NoError(t, Sessions(&out, st))
	lines := fields(out.String())
	assert.Equal(t, []string{
		"mcpmux v1, pid 7, up 1m, 0 goroutines, 0.0 MiB resident, config /etc/mux.toml",
		"SERVER STATE PID UPTIME ERA SESSIONS IN FLIGHT RESTARTS LAST EXIT",
		"modern ready 10 1m modern 2 0 0 -",
		"idle idle - - - 0 0 0 -",
		"slow starting 12s 11 - - 0 0 0 -",
	}, lines[:5])
	assert.Contains(t, lines, "modern 1 unix - claude 2025-06-18 (legacy) 5s 0")
	assert.Contains(t, lines, "modern 2 http 127.0.0.1:5000 go 2026-07-28 (modern) 1s 1")
}

// Twenty servers fit a terminal 100 columns wide: 22 lines, none wider,
// the last exit cut with "…".
func TestTableOfTwentyServersFits(t *testing.T) {
	st := daemon.Status{Version: "v1.2.3", Config: "/home/someone/.config/mcpmux/mux.toml", Pid: 4242, Uptime: "26h3m12s", Goroutines: 812, RSSBytes: 48 << 20,
		Endpoints: []daemon.EndpointStatus{{Name: "all", Servers: []string{"x"}}}}
	for i := range 20 {
		st.Servers = append(st.Servers, mux.Status{Name: fmt.Sprintf("server-%02d", i), State: mux.StateReady, Pid: 100000 + i, Uptime: "26h3m10s",
			Era: "legacy", Sessions: 12, Inflight: 3, Restarts: 2, Stderr: []string{"a line", "another"},
			LastExit: "exit status 1 (crashed): Error: Cannot find module '/usr/lib/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'\n    at Module._resolveFilename"})
	}
	var out bytes.Buffer
	require.NoError(t, Table(&out, st, 100))
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	assert.LessOrEqual(t, len(lines), 22, "%s", out.String())
	for _, l := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 100, "%q", l)
	}
	assert.True(t, strings.HasSuffix(lines[2], "…"), "the last exit is cut: %q", lines[2])
	assert.NotContains(t, out.String(), "another", "stderr tails are for status NAME")
}

// status NAME shows one server in full: protocol, last exit whole, what
// takes turns, its projects, its sessions and its stderr lines.
func TestServerInFull(t *testing.T) {
	st := daemon.Status{Servers: []mux.Status{
		{Name: "code", State: "project", Asks: []string{"tools/call ask"}, LastExit: "exit status 2\nsecond line",
			Instances:   []mux.InstanceStatus{{Project: "/src/a", State: mux.StateReady, Pid: 42, Sessions: 2}},
			SessionList: []mux.SessionStatus{{ID: 3, Transport: "unix", Client: "claude", Protocol: "2025-06-18", Era: "legacy", Age: "5s"}},
			Stderr:      []string{"listening\n", "ready"}},
		{Name: "other", State: mux.StateReady, Dormant: 4},
	}}
	var out bytes.Buffer
	require.NoError(t, Server(&out, st, "code"))
	lines := fields(out.String())
	assert.Equal(t, "code: project, pid -, up -, protocol -, 0 restarts, 0 sessions, 0 in flight", lines[0])
	assert.Contains(t, out.String(), "last exit: exit status 2\nsecond line\n")
	assert.Contains(t, lines, "code: these requests cause the server's own, and take turns: tools/call ask")
	assert.Contains(t, lines, "/src/a ready pid 42 2 sessions")
	assert.Contains(t, lines, "code 3 unix - claude 2025-06-18 (legacy) 5s 0")
	assert.Contains(t, out.String(), "stderr (last 2 lines):\n  listening\n  ready\n")
	assert.NotContains(t, out.String(), "other")
	assert.EqualError(t, Server(&out, st, "nope"), `no server named "nope": the daemon serves code, other`)
	out.Reset()
	require.NoError(t, Sessions(&out, st))
	assert.Contains(t, out.String(), "\nother: 4 dormant HTTP sessions (", "status -v counts a server's dormant sessions")
}

// A daemon with no servers says so; one that cannot start a server for
// want of resources says why; endpoints in use get a line.
func TestTableNotes(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Table(&out, daemon.Status{Version: "v1", Pid: 7, Uptime: "1m"}, 0))
	assert.Contains(t, out.String(), "\nwarning: no servers: the config has no [servers.NAME] table; add one, then `mcpmux reload`\n")
	out.Reset()
	require.NoError(t, Table(&out, daemon.Status{Version: "v1", Pid: 7, Uptime: "1m",
		Servers:   []mux.Status{{Name: "demo", State: mux.StateBackoff, Shortage: "out of file descriptors (EMFILE)"}, {Name: "b", State: mux.StateReady}},
		Endpoints: []daemon.EndpointStatus{{Name: "all", Servers: []string{"demo", "b"}, Sessions: 3}, {Name: "quiet", Servers: []string{"b"}}}}, 0))
	assert.Contains(t, out.String(), "\ndemo cannot start for want of the machine's resources (no crash: it is tried again with backoff): out of file descriptors (EMFILE)\n")
	assert.Contains(t, out.String(), "\nendpoints in use: all (3 sessions)\n")
	assert.NotContains(t, out.String(), "quiet")
}
