package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/mux"
)

// status shows each server's protocol revision and era, and with -v each
// session's.
func TestPrintStatusShowsEras(t *testing.T) {
	st := daemon.Status{Version: "v1", Config: "/etc/mux.toml", Pid: 7, Uptime: "1m", Servers: []mux.Status{
		{Name: "modern", State: mux.StateReady, Pid: 10, Uptime: "1m", Protocol: "2026-07-28", Era: "modern", Sessions: 2,
			SessionList: []mux.SessionStatus{
				{ID: 1, Transport: "unix", Client: "claude", Protocol: "2025-06-18", Era: "legacy", Age: "5s"},
				{ID: 2, Transport: "http", Peer: "127.0.0.1:5000", Client: "go", Protocol: "2026-07-28", Era: "modern", Age: "1s", Inflight: 1},
			}},
		{Name: "idle", State: mux.StateIdle},
		{Name: "code", State: "project", Instances: []mux.InstanceStatus{{Project: "/src/a", State: mux.StateReady, Pid: 42, Sessions: 2}}},
	}}
	var out bytes.Buffer
	require.NoError(t, printStatus(&out, st))
	require.NoError(t, printSessions(&out, st))
	lines := strings.Split(out.String(), "\n")
	find := func(prefix string) string {
		for _, l := range lines {
			if l = strings.Join(strings.Fields(l), " "); strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starting %q in:\n%s", prefix, out.String())
		return ""
	}
	assert.Equal(t, "modern ready 10 1m 2026-07-28 (modern) 0 2 0 -", find("modern "))
	assert.Equal(t, "idle idle - - - 0 0 0 -", find("idle "))
	assert.Contains(t, out.String(), "SERVER  SESSION")
	assert.Equal(t, []string{"mcpmux v1, pid 7, up 1m, 0 goroutines, 0.0 MiB resident", "config /etc/mux.toml", ""}, lines[:3], "the head names the daemon's config")
	assert.Equal(t, "/src/a ready pid 42 2 sessions", find("/src/a"), "a project instance")
	assert.Equal(t, []string{"modern 1 unix - claude 2025-06-18 (legacy) 5s 0", "modern 2 http 127.0.0.1:5000 go 2026-07-28 (modern) 1s 1"},
		[]string{find("modern 1"), find("modern 2")})
}

// status of a daemon with no servers says so.
func TestPrintStatusWarnsOfNoServers(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, printStatus(&out, daemon.Status{Version: "v1", Config: "/etc/mux.toml", Pid: 7, Uptime: "1m"}))
	assert.Equal(t, "mcpmux v1, pid 7, up 1m, 0 goroutines, 0.0 MiB resident\nconfig /etc/mux.toml\n"+
		"warning: no servers: the config has no [servers.NAME] table; add one, then `mcpmux reload`\n\n"+
		"SERVER  STATE  PID  UPTIME  PROTOCOL  RESTARTS  SESSIONS  IN FLIGHT  LAST EXIT\n", out.String())
}

// status names the cause of a server that cannot start for want of the
// machine's resources.
func TestPrintStatusNamesAShortage(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, printStatus(&out, daemon.Status{Version: "v1", Pid: 7, Uptime: "1m", Servers: []mux.Status{
		{Name: "demo", State: mux.StateBackoff, Shortage: "out of file descriptors (EMFILE): start demo: pipe2: too many open files"},
	}}))
	assert.Contains(t, out.String(), "\ndemo cannot start for want of the machine's resources (no crash: it is tried again with backoff): out of file descriptors (EMFILE): start demo: pipe2: too many open files\n")
}

// status lists the endpoints, with their servers and sessions.
func TestPrintStatusListsEndpoints(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, printStatus(&out, daemon.Status{Version: "v1", Pid: 7, Uptime: "1m",
		Servers:   []mux.Status{{Name: "a", State: mux.StateReady}, {Name: "b", State: mux.StateReady}},
		Endpoints: []daemon.EndpointStatus{{Name: "all", Servers: []string{"a", "b"}, Sessions: 3}}}))
	assert.Contains(t, out.String(), "\n\nENDPOINT  SESSIONS  SERVERS\nall       3         a, b\n")
}
