package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/endpoint"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
	"github.com/mcpmux/mcpmux/upstream"
)

// TestParseConfigFull sets every key and checks the whole result.
func TestParseConfigFull(t *testing.T) {
	dir := t.TempDir()
	cwd := t.TempDir()
	doc := fmt.Sprintf(`# every key there is
[daemon]
log_level = "debug"
log_format = "json"
autostart = false
idle_exit = "90s"
first_byte_timeout = "20s"
line_timeout = "0s"
max_queued_bytes = "256MiB"
max_http_sessions = 64

[listen]
socket_dir = "run/sockets"
http = "127.0.0.1:7878"
http_token = "s3cret"
http_origins = ["https://app.example", "http://localhost:3000"]
max_inflight = 32
outbox_high_water = "512KiB"
outbox_max = 8388608
http_allow_remote = true
max_streams_per_conn = 16
http_session_idle = "5m"
http_session_dormant = "2m"
drain_timeout = "3s"
http_max_connections = 100
http_max_streams = 60
http_max_listens = 4

[servers.memory]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-memory"]
env = { MEMORY_FILE_PATH = "/home/me/memory.json", EMPTY = "" }
inherit_env = ["LANG", "HTTPS_PROXY"]
cwd = %q
stderr = "file:logs/memory.log"
stdin_grace = "250ms"
term_grace = "1m30s"
start_timeout = "5s"
initialize_timeout = "2m"
first_start_timeout = "3m"
protocol = "legacy"
upstream_capabilities = { sampling = {}, elicitation = { form = {}, url = {} } }
max_message_bytes = "2MB"
max_junk_lines = 0
write_queue_bytes = "1GiB"
restart_backoff = "10ms"
restart_backoff_max = "1s"
restart_window = "10s"
max_restarts = 0
write_stall_timeout = "0s"
ping_interval = "15s"
ping_failures = 2
request_timeout = "2m"
start = "lazy"
idle_timeout = "10m"
max_sessions = 8
max_concurrency = 1
server_requests = "serialize"
server_request_timeout = "5s"
roots = ["file:///home/me/project"]
default_log_level = "warning"
share = "isolated"
max_projects = 3
project_roots = ["/srv/code", "/home/me/../me/work/"]
allow_tools = ["read_*", "search"]
deny_tools = ["*_graph", "delete_?"]

[servers."alpha.v2"]
command = "bin/alpha"
stderr = "discard"
max_message_bytes = 4096
write_queue_bytes = "8kib"

[endpoints.code]
servers = ["memory", "alpha.v2"]
allow_tools = ["memory__*", "alpha.v2__read_?"]
deny_tools = ["*delete*"]
separator = "."
`, cwd)

	cfg, err := Parse([]byte(doc), "mux.toml", dir)
	require.NoError(t, err)

	want := &Config{
		Path: filepath.Join(dir, "mux.toml"),
		Daemon: Daemon{LogLevel: slog.LevelDebug, LogFormat: "json", Autostart: false, IdleExit: 90 * time.Second,
			FirstByteTimeout: 20 * time.Second, LineTimeout: daemon.NoLimit /* "0s" */, MaxQueuedBytes: 256 << 20, MaxHTTPSessions: 64},
		Listen: Listen{
			SocketDir:         filepath.Join(dir, "run", "sockets"),
			MaxStreamsPerConn: 16,
			Session: session.Config{
				MaxInflight:     32,
				OutboxHighWater: 512 << 10,
				OutboxMax:       8 << 20,
				DrainTimeout:    3 * time.Second,
			},
			Web: socket.WebConfig{
				Addr:               "127.0.0.1:7878",
				Token:              "s3cret",
				Origins:            []string{"https://app.example", "http://localhost:3000"},
				AllowRemote:        true,
				HTTPSessionIdle:    5 * time.Minute,
				HTTPSessionDormant: 2 * time.Minute,
				MaxInflight:        32,
				MaxConnections:     100,
				MaxStreams:         60,
				MaxListens:         4,
			},
		},
		Servers: []daemon.Server{
			{Hub: mux.Config{
				Name: "alpha.v2",
				Upstream: upstream.Config{
					Command:           filepath.Join(dir, "bin", "alpha"),
					Stderr:            upstream.StderrDiscard,
					StdinGrace:        2 * time.Second,
					TermGrace:         2 * time.Second,
					MaxMessageBytes:   4096,
					MaxJunkLines:      10,
					WriteQueueBytes:   8 << 10,
					WriteStallTimeout: time.Minute,
				},
				StartTimeout:      30 * time.Second,
				InitializeTimeout: 5 * time.Minute,
				FirstStartTimeout: 5 * time.Minute,
				Protocol:          "auto",

				RestartBackoff:    250 * time.Millisecond,
				RestartBackoffMax: 30 * time.Second,
				RestartWindow:     time.Minute,
				MaxRestarts:       5,
				PingFailures:      3,

				MaxSessions:          1024,
				ServerRequests:       "auto",
				ServerRequestTimeout: time.Minute,
				DefaultLogLevel:      "info",
			}},
			{Hub: mux.Config{
				Name: "memory",
				Upstream: upstream.Config{
					Command:           "npx",
					Args:              []string{"-y", "@modelcontextprotocol/server-memory"},
					Env:               map[string]string{"MEMORY_FILE_PATH": "/home/me/memory.json", "EMPTY": ""},
					InheritEnv:        []string{"LANG", "HTTPS_PROXY"},
					Dir:               cwd,
					Stderr:            upstream.StderrFile,
					StderrPath:        filepath.Join(dir, "logs", "memory.log"),
					StdinGrace:        250 * time.Millisecond,
					TermGrace:         90 * time.Second,
					MaxMessageBytes:   2_000_000,
					MaxJunkLines:      upstream.None, // max_junk_lines = 0: none tolerated
					WriteQueueBytes:   1 << 30,
					WriteStallTimeout: upstream.None, // write_stall_timeout = "0s": off
				},
				StartTimeout:         5 * time.Second,
				InitializeTimeout:    2 * time.Minute,
				FirstStartTimeout:    3 * time.Minute,
				Protocol:             "legacy",
				UpstreamCapabilities: json.RawMessage(`{"elicitation":{"form":{},"url":{}},"sampling":{}}`),

				RestartBackoff:    10 * time.Millisecond,
				RestartBackoffMax: time.Second,
				RestartWindow:     10 * time.Second,
				MaxRestarts:       mux.NoLimit, // max_restarts = 0
				PingInterval:      15 * time.Second,
				PingFailures:      2,
				RequestTimeout:    2 * time.Minute,
				Lazy:              true,
				IdleTimeout:       10 * time.Minute,

				MaxSessions:          8,
				MaxConcurrency:       1,
				ServerRequests:       "serialize",
				ServerRequestTimeout: 5 * time.Second,
				Roots:                []string{"file:///home/me/project"},
				DefaultLogLevel:      "warning",
				MaxProjects:          3,
				ProjectRoots:         []string{"/srv/code", "/home/me/work"},
				Tools:                mux.ToolView{Allow: []string{"read_*", "search"}, Deny: []string{"*_graph", "delete_?"}},
			}, Share: "isolated"},
		},
		Endpoints: []endpoint.Config{
			{Name: "all", Servers: []string{"alpha.v2", "memory"}},
			{Name: "code", Servers: []string{"memory", "alpha.v2"}, AllowTools: []string{"memory__*", "alpha.v2__read_?"},
				DenyTools: []string{"*delete*"}, Separator: "."},
		},
	}
	assert.Equal(t, want, cfg, "full config:\n%s", doc)
}

// TestParseConfigDefaults checks what absent keys become.
func TestParseConfigDefaults(t *testing.T) {
	server := func(name, command string) daemon.Server {
		return daemon.Server{Hub: mux.Config{
			Name: name,
			Upstream: upstream.Config{
				Command:           command,
				Stderr:            upstream.StderrLog,
				StdinGrace:        2 * time.Second,
				TermGrace:         2 * time.Second,
				MaxMessageBytes:   16 << 20,
				MaxJunkLines:      10,
				WriteQueueBytes:   64 << 20,
				WriteStallTimeout: time.Minute,
			},
			StartTimeout:      30 * time.Second,
			InitializeTimeout: 5 * time.Minute,
			FirstStartTimeout: 5 * time.Minute,
			Protocol:          "auto",

			RestartBackoff:    250 * time.Millisecond,
			RestartBackoffMax: 30 * time.Second,
			RestartWindow:     time.Minute,
			MaxRestarts:       5,
			PingFailures:      3,

			MaxSessions:          1024,
			ServerRequests:       "auto",
			ServerRequestTimeout: time.Minute,
			DefaultLogLevel:      "info",
		}}
	}
	listen := func(socketDir string) Listen {
		return Listen{
			SocketDir:         socketDir,
			MaxStreamsPerConn: 256,
			Session: session.Config{
				MaxInflight:     256,
				OutboxHighWater: 1 << 20,
				OutboxMax:       64 << 20,
				DrainTimeout:    time.Minute,
			},
			Web: socket.WebConfig{
				MaxInflight:        256,
				HTTPSessionIdle:    24 * time.Hour,
				HTTPSessionDormant: 10 * time.Minute,
				MaxConnections:     1024,
				MaxStreams:         768,
				MaxListens:         16,
			},
		}
	}
	daemonTable := Daemon{LogLevel: slog.LevelInfo, LogFormat: "text", Autostart: true,
		FirstByteTimeout: time.Minute, LineTimeout: time.Minute, MaxQueuedBytes: 1 << 30, MaxHTTPSessions: 256}
	defaultDir, note := DefaultSocketDir(os.Getuid())
	require.Empty(t, note, "this machine's default socket folder is the usual one")

	tests := []struct {
		name       string
		runtimeDir string // XDG_RUNTIME_DIR
		doc        string
		want       *Config
	}{
		{
			name: "empty file",
			doc:  "",
			want: &Config{Path: "/etc/mcpmux/mux.toml", Daemon: daemonTable, Listen: listen(defaultDir),
				Endpoints: []endpoint.Config{{Name: "all"}}},
		},
		{
			// Clients strip XDG_RUNTIME_DIR from the environment of the
			// commands they start: the folder must not depend on it.
			name:       "the socket folder does not depend on XDG_RUNTIME_DIR",
			runtimeDir: "/run/user/4242",
			doc:        "[servers.memory]\ncommand = \"npx\"\n",
			want: &Config{
				Path: "/etc/mcpmux/mux.toml", Daemon: daemonTable, Listen: listen(defaultDir),
				Servers:   []daemon.Server{server("memory", "npx")},
				Endpoints: []endpoint.Config{{Name: "all", Servers: []string{"memory"}}},
			},
		},
		{
			name: "empty tables, servers sorted by name, other spellings of tables",
			doc: `servers.beta.command = "b"
servers.zeta = { command = "z" }
[daemon]
[listen]
[servers.alpha]
command = "a"
`,
			want: &Config{
				Path: "/etc/mcpmux/mux.toml", Daemon: daemonTable, Listen: listen(defaultDir),
				Servers:   []daemon.Server{server("alpha", "a"), server("beta", "b"), server("zeta", "z")},
				Endpoints: []endpoint.Config{{Name: "all", Servers: []string{"alpha", "beta", "zeta"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_RUNTIME_DIR", tt.runtimeDir)
			cfg, err := Parse([]byte(tt.doc), "mux.toml", "/etc/mcpmux")
			require.NoError(t, err, "doc:\n%s", tt.doc)
			assert.Equal(t, tt.want, cfg, "doc:\n%s", tt.doc)
		})
	}
}

// TestParseConfigPaths checks how each kind of path in the file is resolved
// against the config's folder.
func TestParseConfigPaths(t *testing.T) {
	const dir = "/etc/mcpmux"
	tests := []struct {
		value string // the value in the file
		want  string
	}{
		{"server", "server"}, // bare command: PATH lookup at start, kept as is
		{"./server", "/etc/mcpmux/server"},
		{"bin/server", "/etc/mcpmux/bin/server"},
		{"../bin/server", "/etc/bin/server"},
		{"/usr/local/bin/server", "/usr/local/bin/server"},
		{"/opt/My Tools//server", "/opt/My Tools/server"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			doc := fmt.Sprintf("[listen]\nsocket_dir = %q\n[servers.s]\ncommand = %q\nstderr = \"file:%s\"\n",
				tt.value, tt.value, tt.value)
			cfg, err := Parse([]byte(doc), "mux.toml", dir)
			require.NoError(t, err, "doc:\n%s", doc)
			require.Len(t, cfg.Servers, 1)

			// socket_dir and file: paths are always paths, even without a slash.
			wantPath := tt.want
			if !filepath.IsAbs(wantPath) {
				wantPath = filepath.Join(dir, wantPath)
			}
			u := cfg.Servers[0].Hub.Upstream
			got := [4]string{u.Command, cfg.Listen.SocketDir, u.Stderr.String(), u.StderrPath}
			assert.Equal(t, [4]string{tt.want, wantPath, "file", wantPath}, got, "value %q", tt.value)
		})
	}
}

// TestParseConfigErrors checks that each kind of problem is reported as
// exactly one error naming the file, the line and the key.
func TestParseConfigErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "regular-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	missing := filepath.Join(t.TempDir(), "missing")

	tests := []struct {
		name string
		doc  string
		want string // "line: key: message" or a start of it
	}{
		// Unknown and misplaced keys.
		{"unknown top-level key", "foo = 1\n", `1: foo: unknown key (the file has [daemon], [listen] and [servers.NAME] tables)`},
		{"top-level key of another table", "\nlog_level = \"debug\"\n", `2: log_level: unknown key here (it belongs in [daemon])`},
		{"unknown top-level table", "[deamon]\nlog_level = \"debug\"\n", `1: deamon: unknown key`},
		{"unknown daemon key", "[daemon]\nlevel = \"debug\"\n", `2: daemon.level: unknown key`},
		{"server key under daemon", "[daemon]\nstdin_grace = \"1s\"\n", `2: daemon.stdin_grace: unknown key here (it belongs in [servers.NAME])`},
		{"unknown listen key", "[listen]\n\nsocket = \"/run\"\n", `3: listen.socket: unknown key`},
		{"command under listen", "[listen]\ncommand = \"npx\"\n", `2: listen.command: unknown key here (it belongs in [servers.NAME])`},
		{"unknown server key", "[servers.memory]\ncommand = \"npx\"\ncomand = \"npx\"\n", `3: servers.memory.comand: unknown key`},
		{"listen key under a server", "[servers.memory]\ncommand = \"npx\"\nsocket_dir = \"/run\"\n", `3: servers.memory.socket_dir: unknown key here (it belongs in [listen])`},
		{"sub-table of a server", "[servers.x]\ncommand = \"a\"\n\n[servers.x.foo]\nbar = 1\n", `4: servers.x.foo: unknown key`},
		{"dotted unknown key", "servers.x.command = \"a\"\nservers.x.bogus = 1\n", `2: servers.x.bogus: unknown key`},
		{"unknown key in an inline table", "[servers]\nx = { command = \"a\",\n  bogus = 1 }\n", `3: servers.x.bogus: unknown key`},

		// Wrong types.
		{"daemon not a table", "daemon = 1\n", `1: daemon: must be a table (got an integer)`},
		{"daemon as array of tables", "[[daemon]]\nlog_level = \"info\"\n", `1: daemon: must be a table (got an array)`},
		{"servers not a table", "servers = [1]\n", `1: servers: must be a table (got an array)`},
		{"server not a table", "[servers]\nx = \"npx\"\n", `2: servers.x: must be a [servers.NAME] table (got a string)`},
		{"server as array of tables", "[[servers.x]]\ncommand = \"a\"\n", `1: servers.x: must be a [servers.NAME] table (got an array)`},
		{"string: log_level", "[daemon]\nlog_level = 1\n", `2: daemon.log_level: must be a string (got an integer)`},
		{"string: log_format date", "[daemon]\nlog_format = 1979-05-27\n", `2: daemon.log_format: must be a string (got a date or time)`},
		{"string: http_token", "[listen]\nhttp_token = true\n", `2: listen.http_token: must be a string (got a boolean)`},
		{"string: command", "[servers.x]\ncommand = [\"npx\"]\n", `2: servers.x.command: must be a string (got an array)`},
		{"string: cwd", "[servers.x]\ncommand = \"a\"\ncwd = 1\n", `3: servers.x.cwd: must be a string (got an integer)`},
		{"string: stderr", "[servers.x]\ncommand = \"a\"\nstderr = false\n", `3: servers.x.stderr: must be a string (got a boolean)`},
		{"strings: args not an array", "[servers.x]\ncommand = \"a\"\nargs = \"-y\"\n", `3: servers.x.args: must be an array of strings (got a string)`},
		{"strings: args element", "[servers.x]\ncommand = \"a\"\nargs = [\n  \"-y\",\n  2,\n]\n", `3: servers.x.args: must be an array of strings (element 1 is an integer)`},
		{"strings: http_origins", "[listen]\nhttp_origins = \"*\"\n", `2: listen.http_origins: must be an array of strings (got a string)`},
		{"strings: inherit_env", "[servers.x]\ncommand = \"a\"\ninherit_env = [1]\n", `3: servers.x.inherit_env: must be an array of strings (element 0 is an integer)`},
		{"table: env", "[servers.x]\ncommand = \"a\"\nenv = \"A=1\"\n", `3: servers.x.env: must be a table (got a string)`},
		{"string: env value", "[servers.x]\ncommand = \"a\"\nenv = { A = \"1\",\n  B = 2 }\n", `4: servers.x.env.B: must be a string (got an integer)`},
		{"duration: integer", "[servers.x]\ncommand = \"a\"\nstdin_grace = 2\n", `3: servers.x.stdin_grace: must be a duration string such as "2s" or "250ms" (got an integer)`},
		{"size: float", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = 1.5\n", `3: servers.x.max_message_bytes: must be a size: an integer number of bytes or a string such as "16MiB" (got a float)`},
		{"size: boolean", "[listen]\noutbox_max = true\n", `2: listen.outbox_max: must be a size`},
		{"integer: string", "[listen]\nmax_inflight = \"3\"\n", `2: listen.max_inflight: must be an integer (got a string)`},
		{"integer: float", "[servers.x]\ncommand = \"a\"\nmax_junk_lines = 1.0\n", `3: servers.x.max_junk_lines: must be an integer (got a float)`},

		// Bad values.
		{"bad log_level", "[daemon]\nlog_level = \"verbose\"\n", `2: daemon.log_level: invalid log level "verbose"`},
		{"bad log_format", "[daemon]\nlog_format = \"xml\"\n", `2: daemon.log_format: invalid log format "xml"`},
		{"empty socket_dir", "[listen]\nsocket_dir = \"\"\n", `2: listen.socket_dir: must not be empty`},
		{"http without port", "[listen]\nhttp = \"localhost\"\n", `2: listen.http: invalid address "localhost"`},
		{"http with empty port", "[listen]\nhttp = \"localhost:\"\n", `2: listen.http: invalid address "localhost:"`},
		{"empty origin", "[listen]\nhttp_origins = [\"\"]\n", `2: listen.http_origins: origins must not be empty strings`},
		{"max_inflight zero", "[listen]\nmax_inflight = 0\n", `2: listen.max_inflight: must be at least 1 (got 0)`},
		{"project_roots relative", "[servers.a]\ncommand = \"/bin/true\"\nproject_roots = [\"code\"]\n", `3: servers.a.project_roots: "code" must be an absolute path, or start with ~/`},
		{"max_projects zero", "[servers.a]\ncommand = \"/bin/true\"\nmax_projects = 0\n", `3: servers.a.max_projects: `},
		{"http_session_idle zero", "[listen]\nhttp_session_idle = \"0s\"\n", `2: listen.http_session_idle: must be longer than zero`},
		{"outbox_max not above high water", "[listen]\noutbox_high_water = \"2MiB\"\noutbox_max = \"2MiB\"\n", `3: listen.outbox_max: 2MiB must be larger than outbox_high_water (2MiB)`},
		{"max_queued_bytes below outbox_max", "[daemon]\nmax_queued_bytes = \"32MiB\"\n", `2: daemon.max_queued_bytes: 32MiB must be 0 (no bound) or at least [listen] outbox_max (64MiB)`},
		{"line_timeout negative", "[daemon]\nline_timeout = \"-1s\"\n", `2: daemon.line_timeout: negative duration "-1s"`},
		{"http_max_streams not below connections", "[listen]\nhttp_max_connections = 100\nhttp_max_streams = 100\n", `3: listen.http_max_streams: 100 must be smaller than http_max_connections (100), so that short requests have room`},
		{"http_max_streams default not below connections", "[listen]\nhttp_max_connections = 1\n", `1: listen.http_max_streams: 1 must be smaller than http_max_connections (1), so that short requests have room`},
		{"metrics without http", "[listen]\nmetrics = true\n", `2: listen.metrics: true needs a web listener ([listen] http)`},
		{"metrics not a boolean", "[listen]\nhttp = \"127.0.0.1:1\"\nmetrics = \"yes\"\n", `3: listen.metrics: must be true or false (got a string)`},
		{"http_max_listens zero", "[listen]\nhttp_max_listens = 0\n", `2: listen.http_max_listens: must be at least 1 (got 0)`},
		{"outbox_high_water above default max", "[listen]\noutbox_high_water = \"64MiB\"\n", `2: listen.outbox_high_water: 64MiB must be smaller than outbox_max (default 64MiB)`},
		{"bad duration", "[servers.memory]\ncommand = \"npx\"\nstdin_grace = \"2 s\"\n", `3: servers.memory.stdin_grace: invalid duration "2 s"`},
		{"duration without unit", "[servers.memory]\ncommand = \"npx\"\nterm_grace = \"2\"\n", `3: servers.memory.term_grace: invalid duration "2"`},
		{"negative duration", "[servers.memory]\ncommand = \"npx\"\nterm_grace = \"-1s\"\n", `3: servers.memory.term_grace: negative duration "-1s"`},
		{"zero start_timeout", "[servers.memory]\ncommand = \"npx\"\nstart_timeout = \"0s\"\n", `3: servers.memory.start_timeout: must be longer than zero`},
		{"size with space", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = \"16 MiB\"\n", `3: servers.x.max_message_bytes: invalid size "16 MiB"`},
		{"size with unknown unit", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = \"16XB\"\n", `3: servers.x.max_message_bytes: invalid size "16XB"`},
		{"size with fraction", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = \"1.5MiB\"\n", `3: servers.x.max_message_bytes: invalid size "1.5MiB"`},
		{"negative size string", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = \"-1MiB\"\n", `3: servers.x.max_message_bytes: invalid size "-1MiB"`},
		{"negative size integer", "[servers.x]\ncommand = \"a\"\nwrite_queue_bytes = -5\n", `3: servers.x.write_queue_bytes: negative size -5`},
		{"size unit alone", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = \"MiB\"\n", `3: servers.x.max_message_bytes: invalid size "MiB"`},
		{"empty size", "[listen]\noutbox_max = \"\"\n", `2: listen.outbox_max: invalid size ""`},
		{"size overflow by digits", "[listen]\noutbox_max = \"99999999999999999999\"\n", `2: listen.outbox_max: size "99999999999999999999" is too large`},
		{"size overflow by unit", "[listen]\noutbox_max = \"9000000000GiB\"\n", `2: listen.outbox_max: size "9000000000GiB" is too large`},
		{"max_message_bytes too small", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = 100\n", `3: servers.x.max_message_bytes: 100B is out of range: want 1KiB to 1GiB`},
		{"max_message_bytes too large", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = \"2GiB\"\nwrite_queue_bytes = \"4GiB\"\n", `3: servers.x.max_message_bytes: 2GiB is out of range`},
		{"write_queue_bytes below twice the message", "[servers.x]\ncommand = \"a\"\n\nwrite_queue_bytes = \"16MiB\"\n", `4: servers.x.write_queue_bytes: 16MiB must be at least twice max_message_bytes (16MiB)`},
		{"max_message_bytes above half the default queue", "[servers.x]\ncommand = \"a\"\nmax_message_bytes = \"64MiB\"\n", `3: servers.x.max_message_bytes: 64MiB needs write_queue_bytes of at least twice that`},
		{"negative max_junk_lines", "[servers.x]\ncommand = \"a\"\nmax_junk_lines = -1\n", `3: servers.x.max_junk_lines: must not be negative (got -1)`},
		{"bad stderr", "[servers.x]\ncommand = \"a\"\nstderr = \"syslog\"\n", `3: servers.x.stderr: invalid value "syslog"`},
		{"bad protocol", "[servers.x]\ncommand = \"a\"\nprotocol = \"2026\"\n", `3: servers.x.protocol: invalid value "2026": want "auto", "legacy" or "modern"`},
		{"bad server_requests", "[servers.x]\ncommand = \"a\"\nserver_requests = \"first\"\n", `3: servers.x.server_requests: invalid value "first": want "auto", "latest" or "serialize"`},
		{"zero max_concurrency", "[servers.x]\ncommand = \"a\"\nmax_concurrency = 0\n", `3: servers.x.max_concurrency:`},
		{"zero initialize_timeout", "[servers.x]\ncommand = \"a\"\ninitialize_timeout = \"0s\"\n", `3: servers.x.initialize_timeout:`},
		{"upstream_capabilities not a table", "[servers.x]\ncommand = \"a\"\nupstream_capabilities = \"all\"\n", `3: servers.x.upstream_capabilities: must be a table (got a string)`},
		{"stderr file without path", "[servers.x]\ncommand = \"a\"\nstderr = \"file:\"\n", `3: servers.x.stderr: "file:" needs a path`},
		{"env name with =", "[servers.x]\ncommand = \"a\"\n[servers.x.env]\nOK = \"1\"\n\"A=B\" = \"x\"\n", `5: servers.x.env."A=B": invalid variable name`},
		{"empty env name", "[servers.x]\ncommand = \"a\"\nenv = { \"\" = \"x\" }\n", `3: servers.x.env."": invalid variable name`},
		{"env value with NUL", "[servers.x]\ncommand = \"a\"\nenv.A = \"x\\u0000y\"\n", `3: servers.x.env.A: must not contain NUL bytes`},
		{"inherit_env name with =", "[servers.x]\ncommand = \"a\"\ninherit_env = [\"LANG\", \"A=B\"]\n", `3: servers.x.inherit_env: invalid variable name "A=B"`},
		{"arg with NUL", "[servers.x]\ncommand = \"a\"\nargs = [\"x\\u0000\"]\n", `3: servers.x.args: arguments must not contain NUL bytes`},
		{"relative cwd", "[servers.x]\ncommand = \"a\"\ncwd = \"work\"\n", `3: servers.x.cwd: "work" must be an absolute path`},
		{"nonexistent cwd", fmt.Sprintf("[servers.x]\ncommand = \"a\"\ncwd = %q\n", missing), fmt.Sprintf(`3: servers.x.cwd: %q does not exist`, missing)},
		{"cwd is a file", fmt.Sprintf("[servers.x]\ncommand = \"a\"\ncwd = %q\n", file), fmt.Sprintf(`3: servers.x.cwd: %q is not a directory`, file)},
		{"empty command", "[servers.x]\ncommand = \"\"\n", `2: servers.x.command: must not be empty`},
		{"blank command", "[servers.x]\ncommand = \"  \"\n", `2: servers.x.command: must not be empty`},
		{"missing command", "\n[servers.x]\nargs = [\"-y\"]\n", `2: servers.x.command: missing: every server needs a command`},
		{"command with arguments", "[servers.x]\ncommand = \"npx -y server\"\n", `2: servers.x.command: "npx -y server": command must be a single executable; put arguments in args`},
		{"command with a tab", "[servers.x]\ncommand = \"npx\\tserver\"\n", `2: servers.x.command: "npx\tserver": command must be a single executable`},
		{"server name with a space", "[servers.\"bad name\"]\ncommand = \"a\"\n", `1: servers."bad name": invalid server name`},
		{"server name starting with _", "[servers]\n_x.command = \"a\"\n", `2: servers._x: invalid server name`},
		{"server name starting with .", "[servers.\".x\"]\ncommand = \"a\"\n", `1: servers.".x": invalid server name`},
		{"server name too long", "[servers." + strings.Repeat("a", 65) + "]\ncommand = \"a\"\n", `1: servers.` + strings.Repeat("a", 65) + `: invalid server name`},
		{"non-ASCII server name", "[servers.\"mémoire\"]\ncommand = \"a\"\n", `1: servers."mémoire": invalid server name`},

		{"server with an empty glob", "[servers.x]\ncommand = \"a\"\nallow_tools = [\"read\", \"\"]\n", `3: servers.x.allow_tools: globs must not be empty strings`},
		{"server deny_tools not a list", "[servers.x]\ncommand = \"a\"\ndeny_tools = \"delete_*\"\n", `3: servers.x.deny_tools: must be an array of strings (got a string)`},
		{"server allow_tools of numbers", "[servers.x]\ncommand = \"a\"\nallow_tools = [1]\n", `3: servers.x.allow_tools: must be an array of strings`},
		{"server view key misspelt", "[servers.x]\ncommand = \"a\"\ndeny_tool = [\"x\"]\n", `3: servers.x.deny_tool: unknown key (did you mean deny_tools?)`},
		{"server view key under listen", "[listen]\ndeny_tools = [\"x\"]\n", `2: listen.deny_tools: unknown key here (it belongs in [servers.NAME])`},

		// Endpoints.
		{"endpoint named as a server", "[servers.fs]\ncommand = \"a\"\n\n[endpoints.fs]\nservers = [\"fs\"]\n", `4: endpoints.fs: the name "fs" is also a server's (servers.fs, line 1): servers and endpoints share one namespace`},
		{"endpoint without servers", "[servers.fs]\ncommand = \"a\"\n[endpoints.code]\nseparator = \".\"\n", `3: endpoints.code.servers: missing: every endpoint needs its list of servers`},
		{"endpoint of an unknown server", "[servers.fs]\ncommand = \"a\"\n[endpoints.code]\nservers = [\"fs\", \"git\"]\n", `4: endpoints.code.servers: unknown server "git": the configured servers are fs`},
		{"endpoint with an empty separator", "[servers.fs]\ncommand = \"a\"\n[endpoints.code]\nservers = [\"fs\"]\nseparator = \"\"\n", `5: endpoints.code.separator: must not be empty (leave it out for "__")`},
		{"endpoint with an empty glob", "[servers.fs]\ncommand = \"a\"\n[endpoints.code]\nservers = [\"fs\"]\ndeny_tools = [\"\"]\n", `5: endpoints.code.deny_tools: globs must not be empty strings`},
		{"endpoint name with a space", "[servers.fs]\ncommand = \"a\"\n[endpoints.\"a b\"]\nservers = [\"fs\"]\n", `3: endpoints."a b": invalid endpoint name`},
		{"unknown endpoint key", "[servers.fs]\ncommand = \"a\"\n[endpoints.code]\nservers = [\"fs\"]\nserver = 1\n", `5: endpoints.code.server: unknown key (did you mean servers?)`},
		{"endpoints not a table", "endpoints = 1\n", `1: endpoints: must be a table (got an integer)`},

		// TOML itself.
		{"syntax: missing value", "[servers.x]\ncommand = \n", `2: invalid TOML: `},
		{"syntax: unclosed table header", "[daemon]\nlog_level = \"info\"\n[listen\n", `3: invalid TOML: `},
		{"syntax: unterminated string", "[daemon]\n\nlog_level = \"info\n", `3: invalid TOML: `},
		{"duplicate key", "[servers.x]\ncommand = \"a\"\ncommand = \"b\"\n", `3: servers.x.command: key command is already defined`},
		{"duplicate dotted key", "[servers]\nx.command = \"a\"\nx.command = \"b\"\n", `3: servers.x.command: key command is already defined`},
		{"duplicate key in inline table", "[servers.x]\ncommand = \"a\"\nenv = { A = \"1\", A = \"2\" }\n", `3: servers.x.env: key A is already defined`},
		{"duplicate table", "[servers.x]\ncommand = \"a\"\n[servers.x]\n", `3: servers.x: table x already exists`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.doc), "mux.toml", "/etc/mcpmux")
			require.Error(t, err, "doc:\n%s", tt.doc)
			assert.Nil(t, cfg, "doc:\n%s", tt.doc)
			got := err.Error()
			assert.True(t, strings.HasPrefix(got, "mux.toml:"+tt.want), "doc:\n%s\nerror: %s\nwant:  mux.toml:%s", tt.doc, got, tt.want)
			assert.NotContains(t, got, "\n", "doc:\n%s\nwant exactly one error", tt.doc)
		})
	}
}

// TestParseConfigManyErrors checks that all problems are reported, in line order.
func TestParseConfigManyErrors(t *testing.T) {
	doc := `[servers.b]
command = "b"
term_grace = "forever"

[daemon]
log_level = "loud"

[servers.a]
stderr = "nowhere"
`
	_, err := Parse([]byte(doc), "", "/etc/mcpmux")
	require.Error(t, err)
	want := strings.Join([]string{
		`line 3: servers.b.term_grace: invalid duration "forever"`,
		`line 6: daemon.log_level: invalid log level "loud": want "debug", "info", "warn" or "error"`,
		`line 8: servers.a.command: missing: every server needs a command`,
		`line 9: servers.a.stderr: invalid value "nowhere": want "log", "inherit", "discard" or "file:PATH"`,
	}, "\n")
	assert.Equal(t, want, err.Error(), "doc:\n%s", doc)
}

// TestLoadConfig checks reading from disk: the path in the result and in errors.
func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}

	t.Run("valid", func(t *testing.T) {
		path := write("ok.toml", "[servers.tool]\ncommand = \"./tool\"\n")
		cfg, err := Load(path)
		require.NoError(t, err)
		assert.Equal(t, [2]string{path, filepath.Join(dir, "tool")}, [2]string{cfg.Path, cfg.Servers[0].Hub.Upstream.Command}, "config %s", path)
	})
	t.Run("relative path", func(t *testing.T) {
		write("rel.toml", "[servers.tool]\ncommand = \"bin/tool\"\n")
		t.Chdir(dir)
		cfg, err := Load("rel.toml")
		require.NoError(t, err)
		assert.Equal(t, [2]string{filepath.Join(dir, "rel.toml"), filepath.Join(dir, "bin", "tool")},
			[2]string{cfg.Path, cfg.Servers[0].Hub.Upstream.Command}, "config rel.toml in %s", dir)
	})

	tests := []struct {
		name    string
		path    string
		wantErr string
	}{
		{"bad value", write("bad.toml", "[daemon]\nlog_level = \"loud\"\n"), filepath.Join(dir, "bad.toml") + `:2: daemon.log_level: invalid log level "loud"`},
		{"syntax", write("syntax.toml", "[daemon\n"), filepath.Join(dir, "syntax.toml") + `:1: invalid TOML: `},
		{"missing", filepath.Join(dir, "missing.toml"), "config " + filepath.Join(dir, "missing.toml") + " does not exist: write one (the README's quick start has one), or pass --config FILE"},
		{"too large", write("big.toml", "# "+strings.Repeat("x", 1<<20)+"\n"), filepath.Join(dir, "big.toml") + ": config file is larger than 1MiB"},
		{"a folder", dir, "load config: read " + dir + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.path)
			require.Error(t, err, "config %s", tt.path)
			assert.Nil(t, cfg)
			assert.True(t, strings.HasPrefix(err.Error(), tt.wantErr), "config %s\nerror: %s\nwant:  %s", tt.path, err, tt.wantErr)
		})
	}
}

// TestDefaultConfigPath checks the order in which the environment is consulted.
func TestDefaultConfigPath(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"MCPMUX_CONFIG wins", map[string]string{"MCPMUX_CONFIG": "my.toml", "XDG_CONFIG_HOME": "/xdg", "HOME": "/home/me"}, "my.toml", false},
		{"then XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/home/me"}, "/xdg/mcpmux/mux.toml", false},
		{"relative XDG_CONFIG_HOME is ignored", map[string]string{"XDG_CONFIG_HOME": "xdg", "HOME": "/home/me"}, "/home/me/.config/mcpmux/mux.toml", false},
		{"then HOME", map[string]string{"HOME": "/home/me"}, "/home/me/.config/mcpmux/mux.toml", false},
		{"nothing set", map[string]string{}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DefaultPath(func(k string) string { return tt.env[k] })
			if tt.wantErr {
				assert.Error(t, err, "env %v", tt.env)
				return
			}
			require.NoError(t, err, "env %v", tt.env)
			assert.Equal(t, tt.want, got, "env %v", tt.env)
		})
	}
}

// TestConfigParseSize covers the size syntax on its own.
func TestConfigParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"1024", 1024, false},
		{"100B", 100, false},
		{"100b", 100, false},
		{"2KB", 2000, false},
		{"2MB", 2_000_000, false},
		{"1GB", 1_000_000_000, false},
		{"512KiB", 512 << 10, false},
		{"16MiB", 16 << 20, false},
		{"16mib", 16 << 20, false},
		{"1GiB", 1 << 30, false},
		{"007KiB", 7 << 10, false},
		{"9223372036854775807", 1<<63 - 1, false},
		{"9223372036854775808", 0, true},
		{"8589934592GiB", 0, true},
		{"", 0, true},
		{"MiB", 0, true},
		{"1.5MiB", 0, true},
		{"-1", 0, true},
		{"+1", 0, true},
		{"1_000", 0, true},
		{" 1MiB", 0, true},
		{"1MiB ", 0, true},
		{"1 MiB", 0, true},
		{"1M", 0, true},
		{"1TiB", 0, true},
		{"0x10", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if tt.wantErr {
				assert.Error(t, err, "parseSize(%q) = %d", tt.in, got)
				return
			}
			require.NoError(t, err, "parseSize(%q)", tt.in)
			assert.Equal(t, tt.want, got, "parseSize(%q)", tt.in)
		})
	}
}

// TestParseConfigUnknownAndBadTogether: unknown keys, bad values and
// values of the wrong type are reported together, in line order.
func TestParseConfigUnknownAndBadTogether(t *testing.T) {
	doc := "[daemon]\nlog_level = \"loud\"\n[servers.x]\ncommand = \"a\"\nbogus = 1\nenv = { A = \"1\", nope = 2 }\n"
	_, err := Parse([]byte(doc), "mux.toml", "/etc/mcpmux")
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		`mux.toml:2: daemon.log_level: invalid log level "loud": want "debug", "info", "warn" or "error"`,
		`mux.toml:5: servers.x.bogus: unknown key`,
		`mux.toml:6: servers.x.env.nope: must be a string (got an integer)`,
	}, "\n"), err.Error(), "doc:\n%s", doc)

	doc = "[daemon]\nlog_level = \"loud\"\n[servers]\nx = { command = \"a\",\n  bogus = 1 }\n"
	_, err = Parse([]byte(doc), "mux.toml", "/etc/mcpmux")
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		`mux.toml:2: daemon.log_level: invalid log level "loud": want "debug", "info", "warn" or "error"`,
		`mux.toml:5: servers.x.bogus: unknown key`,
	}, "\n"), err.Error(), "doc:\n%s", doc)
}

// TestParseConfigSixMistakes: a file with six mistakes, three of them
// values of the wrong type, is reported whole, one line per mistake; a
// wrong type does not hide what comes after it.
func TestParseConfigSixMistakes(t *testing.T) {
	doc := `[daemon]
log_level = 1
autostart = "yes"

[servers.memory]
command = "npx"
args = "-y"
stdin_grace = "soon"
max_sessions = 0
restarts = 3
`
	_, err := Parse([]byte(doc), "mux.toml", "/etc/mcpmux")
	require.Error(t, err)
	assert.Equal(t, strings.Join([]string{
		`mux.toml:2: daemon.log_level: must be a string (got an integer)`,
		`mux.toml:3: daemon.autostart: must be true or false (got a string)`,
		`mux.toml:7: servers.memory.args: must be an array of strings (got a string)`,
		`mux.toml:8: servers.memory.stdin_grace: invalid duration "soon"`,
		`mux.toml:9: servers.memory.max_sessions: must be at least 1 (got 0)`,
		`mux.toml:10: servers.memory.restarts: unknown key (did you mean max_restarts?)`,
	}, "\n"), err.Error(), "doc:\n%s", doc)
}

// TestParseConfigDidYouMean: an unknown key is answered with the known key
// of its table it likely misspells, when one stands out; a key of another
// table is still sent there.
func TestParseConfigDidYouMean(t *testing.T) {
	tests := []struct {
		doc  string
		want string
	}{
		{"[servers.memory]\ncomand = \"npx\"\n", "1: servers.memory.command: missing: every server needs a command\n" +
			"mux.toml:2: servers.memory.comand: unknown key (did you mean command?)"},
		{"[servers.memory]\ncommand = \"npx\"\nCommand = \"npx\"\n", `3: servers.memory.Command: unknown key (did you mean command?)`},
		{"[servers.memory]\ncommand = \"npx\"\nargz = []\n", `3: servers.memory.argz: unknown key (did you mean args?)`},
		{"[servers.memory]\ncommand = \"npx\"\nstdin_grcae = \"1s\"\n", `3: servers.memory.stdin_grcae: unknown key (did you mean stdin_grace?)`},
		{"[servers.memory]\ncommand = \"npx\"\n[servers.memory.evn]\nA = \"1\"\n", `3: servers.memory.evn: unknown key (did you mean env?)`},
		{"[deamon]\nlog_level = \"debug\"\n", `1: deamon: unknown key (did you mean daemon?)`},
		{"[daemon]\nlog_levle = \"debug\"\n", `2: daemon.log_levle: unknown key (did you mean log_level?)`},
		{"[daemon]\nlevel = \"debug\"\n", `2: daemon.level: unknown key (did you mean log_level?)`},
		{"[listen]\nsocket = \"/run\"\n", `2: listen.socket: unknown key (did you mean socket_dir?)`},
		// None stands out: two as near, or none near enough.
		{"[servers.memory]\ncommand = \"npx\"\ntimeout = \"1s\"\n", `3: servers.memory.timeout: unknown key`},
		{"[servers.memory]\ncommand = \"npx\"\nbogus = 1\n", `3: servers.memory.bogus: unknown key`},
		{"foo = 1\n", `1: foo: unknown key (the file has [daemon], [listen] and [servers.NAME] tables)`},
		// A key of another table.
		{"[servers.memory]\ncommand = \"npx\"\nlog_level = \"debug\"\n", `3: servers.memory.log_level: unknown key here (it belongs in [daemon])`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.doc), "mux.toml", "/etc/mcpmux")
		require.Error(t, err, "doc:\n%s", tt.doc)
		assert.Equal(t, "mux.toml:"+tt.want, err.Error(), "doc:\n%s", tt.doc)
	}
}

// TestSkim: a file that does not load still says where its daemon serves
// and which servers it has; one that is not TOML says nothing.
func TestSkim(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	broken := write("broken.toml", `[listen]
socket_dir = "run"
max_inflight = "many"   # the file does not load

[servers.mail]
command = "mail-mcp"
cwd = "/no/such/folder"

[servers.memory]
command = "npx"
args = ["-y", 2, "@modelcontextprotocol/server-memory"]
`)
	_, err := Load(broken)
	require.Error(t, err, "the file does not load")
	o, err := Skim(broken)
	require.NoError(t, err)
	assert.Equal(t, Outline{
		SocketDir: filepath.Join(dir, "run"),
		Servers: []OutlinedServer{
			{Name: "mail", Command: []string{"mail-mcp"}},
			{Name: "memory", Command: []string{"npx", "-y", "@modelcontextprotocol/server-memory"}},
		},
	}, o, "outline of %s", broken)

	o, err = Skim(write("other.toml", "[listen]\nsocket_dir = \"/run/mux\"\n[servers]\nx = 1\n"))
	require.NoError(t, err)
	assert.Equal(t, Outline{SocketDir: "/run/mux"}, o, "a server that is not a table: no servers")

	_, err = Skim(write("syntax.toml", "[listen\n"))
	assert.Error(t, err, "not TOML")
	_, err = Skim(filepath.Join(dir, "missing.toml"))
	assert.Error(t, err, "no file")
}

// TestParseConfigEndpoints checks the implicit endpoint "all" and its
// redefinition.
func TestParseConfigEndpoints(t *testing.T) {
	names := func(doc string) []endpoint.Config {
		cfg, err := Parse([]byte(doc), "mux.toml", "/etc/mcpmux")
		require.NoError(t, err, "doc:\n%s", doc)
		return cfg.Endpoints
	}
	two := "[servers.b]\ncommand = \"b\"\n[servers.a]\ncommand = \"a\"\n"
	assert.Equal(t, []endpoint.Config{{Name: "all", Servers: []string{"a", "b"}}}, names(two), "all: every server, sorted")
	assert.Equal(t, []endpoint.Config{{Name: "all", Servers: []string{"b"}, DenyTools: []string{"b__x"}}},
		names(two+"[endpoints.all]\nservers = [\"b\"]\ndeny_tools = [\"b__x\"]\n"), "all redefined")
	assert.Equal(t, []endpoint.Config{{Name: "all", Servers: []string{"a", "b"}}, {Name: "one", Servers: []string{"b"}}},
		names(two+"[endpoints.one]\nservers = [\"b\"]\n"), "all beside another, sorted by name")
	assert.Empty(t, names("[servers.all]\ncommand = \"a\"\n"), "a server named all takes the name")
}

// TestParseConfigMetrics: [listen] metrics = true serves /metrics on the
// web listener; it is off by default.
func TestParseConfigMetrics(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"[listen]\nhttp = \"127.0.0.1:7878\"\n", false},
		{"[listen]\nhttp = \"127.0.0.1:7878\"\nmetrics = true\n", true},
	} {
		cfg, err := Parse([]byte(tt.text), "mux.toml", t.TempDir())
		require.NoError(t, err, "%s", tt.text)
		assert.Equal(t, tt.want, cfg.Listen.Web.Metrics, "%s", tt.text)
	}
}
