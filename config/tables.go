package config

import (
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/endpoint"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
	"github.com/mcpmux/mcpmux/streamable"
	"github.com/mcpmux/mcpmux/upstream"
)

// The tables of the file, each a list of its keys: the key's name, the
// TOML type it takes, what it may hold, and the field of the library's
// configuration it is stored in. A key's default is that field's value in
// defaults or defaultServer: the library's exported default, where the
// library has one.

// The default of write_queue_bytes. The upstream package's own (its zero
// WriteQueueBytes) is twice MaxMessageBytes, which for a library caller
// follows the message size; the file's is fixed, and checked against
// max_message_bytes.
const defaultWriteQueueBytes = 64 << 20

// The bounds of max_message_bytes.
const (
	minMaxMessageBytes = 1 << 10
	maxMaxMessageBytes = 1 << 30
)

// defaults is the configuration of an empty file.
func defaults() *Config {
	dir, note := DefaultSocketDir(os.Getuid())
	return &Config{
		Daemon: Daemon{
			LogLevel:         slog.LevelInfo,
			LogFormat:        "text",
			Autostart:        true,
			FirstByteTimeout: daemon.DefaultFirstByteTimeout,
			LineTimeout:      daemon.DefaultLineTimeout,
			MaxQueuedBytes:   daemon.DefaultMaxQueuedBytes,
			MaxHTTPSessions:  streamable.DefaultMaxSessions,
		},
		Listen: Listen{
			SocketDir:         dir,
			SocketDirNote:     note,
			MaxStreamsPerConn: socket.DefaultMaxStreams,
			Session: session.Config{
				MaxInflight:     session.DefaultMaxInflight,
				OutboxHighWater: session.DefaultOutboxHighWater,
				OutboxMax:       session.DefaultOutboxMax,
				DrainTimeout:    session.DefaultDrainTimeout,
			},
			Web: socket.WebConfig{
				MaxInflight:        session.DefaultMaxInflight,
				HTTPSessionIdle:    streamable.DefaultSessionIdle,
				HTTPSessionDormant: streamable.DefaultSessionDormant,
				MaxConnections:     socket.DefaultMaxConnections,
				MaxStreams:         socket.DefaultMaxStreamsOf(socket.DefaultMaxConnections),
				MaxListens:         streamable.DefaultMaxListens,
			},
		},
	}
}

// defaultServer is the configuration of a [servers.NAME] table with no
// keys (its command is missing).
func defaultServer(name string) daemon.Server {
	return daemon.Server{Hub: mux.Config{
		Name: name,
		Upstream: upstream.Config{
			Stderr:            upstream.StderrLog,
			StdinGrace:        upstream.DefaultStdinGrace,
			TermGrace:         upstream.DefaultTermGrace,
			MaxMessageBytes:   upstream.DefaultMaxMessageBytes,
			MaxJunkLines:      upstream.DefaultMaxJunkLines,
			WriteQueueBytes:   defaultWriteQueueBytes,
			WriteStallTimeout: upstream.DefaultWriteStallTimeout,
		},
		StartTimeout:         mux.DefaultStartTimeout,
		InitializeTimeout:    mux.DefaultInitializeTimeout,
		FirstStartTimeout:    mux.DefaultFirstStartTimeout,
		Protocol:             mux.ProtocolAuto,
		RestartBackoff:       mux.DefaultRestartBackoff,
		RestartBackoffMax:    mux.DefaultRestartBackoffMax,
		RestartWindow:        mux.DefaultRestartWindow,
		MaxRestarts:          mux.DefaultMaxRestarts,
		PingFailures:         mux.DefaultPingFailures,
		MaxSessions:          mux.DefaultMaxSessions,
		ServerRequests:       mux.ServerRequestsAuto,
		ServerRequestTimeout: mux.DefaultServerRequestTimeout,
		DefaultLogLevel:      mux.DefaultSessionLogLevel,
	}}
}

// daemonKeys are the keys of [daemon], stored in c.
func daemonKeys(c *Daemon) []key {
	return []key{
		text("log_level", func(d *decoder, p keyPath, s string) {
			levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
			if l, ok := levels[s]; ok {
				c.LogLevel = l
			} else {
				d.errorf(p, `invalid log level %q: want "debug", "info", "warn" or "error"`, s)
			}
		}),
		text("log_format", func(d *decoder, p keyPath, s string) {
			if s == "text" || s == "json" {
				c.LogFormat = s
			} else {
				d.errorf(p, `invalid log format %q: want "text" or "json"`, s)
			}
		}),
		flag("autostart", &c.Autostart),
		duration("idle_exit", &c.IdleExit, anyDuration),
		durationOr("first_byte_timeout", &c.FirstByteTimeout, daemon.NoLimit),
		durationOr("line_timeout", &c.LineTimeout, daemon.NoLimit),
		sizeOr("max_queued_bytes", &c.MaxQueuedBytes, daemon.NoLimit),
		count("max_http_sessions", &c.MaxHTTPSessions, 1),
	}
}

// listenKeys are the keys of [listen], stored in c.
func listenKeys(c *Listen) []key {
	return []key{
		text("socket_dir", func(d *decoder, p keyPath, s string) {
			if s == "" {
				d.errorf(p, "must not be empty (leave it out for the default)")
			} else {
				c.SocketDir, c.SocketDirNote = d.resolve(s), ""
			}
		}),
		text("http", func(d *decoder, p keyPath, s string) {
			if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
				d.errorf(p, "invalid address %q: want host:port, such as 127.0.0.1:7878", s)
			} else {
				c.Web.Addr = s
			}
		}),
		text("http_token", func(_ *decoder, _ keyPath, s string) { c.Web.Token = s }),
		list("http_origins", func(d *decoder, p keyPath, origins []string) {
			if slices.Contains(origins, "") {
				d.errorf(p, "origins must not be empty strings")
			} else {
				c.Web.Origins = origins
			}
		}),
		count("max_inflight", &c.Session.MaxInflight, 1),
		size("outbox_high_water", &c.Session.OutboxHighWater),
		size("outbox_max", &c.Session.OutboxMax),
		flag("http_allow_remote", &c.Web.AllowRemote),
		count("max_streams_per_conn", &c.MaxStreamsPerConn, 1),
		duration("http_session_idle", &c.Web.HTTPSessionIdle, positive),
		duration("http_session_dormant", &c.Web.HTTPSessionDormant, positive),
		duration("drain_timeout", &c.Session.DrainTimeout, positive),
		count("http_max_connections", &c.Web.MaxConnections, 1),
		count("http_max_streams", &c.Web.MaxStreams, 1),
		count("http_max_listens", &c.Web.MaxListens, 1),
		flag("metrics", &c.Web.Metrics),
	}
}

// serverKeys are the keys of a [servers.NAME] table, stored in s.
func serverKeys(s *daemon.Server) []key {
	h, u := &s.Hub, &s.Hub.Upstream
	return []key{
		// How the process runs.
		text("command", func(d *decoder, p keyPath, c string) { u.Command = d.command(p, c) }),
		list("args", func(d *decoder, p keyPath, args []string) {
			if slices.ContainsFunc(args, hasNUL) {
				d.errorf(p, "arguments must not contain NUL bytes")
			}
			u.Args = args
		}),
		table("env", func(d *decoder, p keyPath, t map[string]any) { u.Env = d.env(p, t) }),
		list("inherit_env", func(d *decoder, p keyPath, names []string) {
			for _, n := range names {
				if !ValidEnvName(n) {
					d.errorf(p, "invalid variable name %q: it must be non-empty, without '=' or NUL", n)
				}
			}
			u.InheritEnv = names
		}),
		text("cwd", func(d *decoder, p keyPath, c string) { u.Dir = d.cwd(p, c) }),
		text("stderr", func(d *decoder, p keyPath, v string) { u.Stderr, u.StderrPath = d.stderr(p, v) }),
		durationOr("stdin_grace", &u.StdinGrace, upstream.None),
		durationOr("term_grace", &u.TermGrace, upstream.None),
		key{"max_message_bytes", func(d *decoder, p keyPath, v any) {
			n, ok := d.size(p, v)
			switch {
			case !ok:
			case n < minMaxMessageBytes || n > maxMaxMessageBytes:
				d.errorf(p, "%s is out of range: want %s to %s", FormatSize(n), FormatSize(minMaxMessageBytes), FormatSize(maxMaxMessageBytes))
			default:
				u.MaxMessageBytes = n
			}
		}},
		countOr("max_junk_lines", &u.MaxJunkLines, upstream.None),
		size("write_queue_bytes", &u.WriteQueueBytes),
		durationOr("write_stall_timeout", &u.WriteStallTimeout, upstream.None),

		// How the router keeps the server up.
		duration("start_timeout", &h.StartTimeout, positive),
		duration("initialize_timeout", &h.InitializeTimeout, positive),
		duration("first_start_timeout", &h.FirstStartTimeout, positive),
		choice("protocol", &h.Protocol, mux.ProtocolAuto, mux.ProtocolLegacy, mux.ProtocolModern),
		duration("restart_backoff", &h.RestartBackoff, positive),
		duration("restart_backoff_max", &h.RestartBackoffMax, positive),
		duration("restart_window", &h.RestartWindow, positive),
		countOr("max_restarts", &h.MaxRestarts, mux.NoLimit),
		duration("ping_interval", &h.PingInterval, anyDuration),
		count("ping_failures", &h.PingFailures, 1),
		duration("request_timeout", &h.RequestTimeout, anyDuration),
		duration("idle_timeout", &h.IdleTimeout, anyDuration),
		count("max_sessions", &h.MaxSessions, 1),
		count("max_concurrency", &h.MaxConcurrency, 1),
		text("start", func(d *decoder, p keyPath, v string) {
			if v != "eager" && v != "lazy" {
				d.errorf(p, "invalid value %q: want %q or %q", v, "eager", "lazy")
			}
			h.Lazy = v == "lazy"
		}),
		choice("share", &s.Share, mux.ShareShared, mux.ShareIsolated, mux.ShareProject),
		list("project_markers", func(d *decoder, p keyPath, markers []string) {
			for _, m := range markers {
				if m == "" || strings.ContainsRune(m, '/') || m == "." || m == ".." {
					d.errorf(p, "invalid marker %q: a file or folder name, such as \".git\"", m)
				}
			}
			h.ProjectMarkers = markers
		}),
		count("max_projects", &h.MaxProjects, 1),
		list("project_roots", func(d *decoder, p keyPath, roots []string) { h.ProjectRoots = d.projectRoots(p, roots) }),

		// What the sessions see of the server.
		list("allow_tools", globs(&h.Tools.Allow)),
		list("deny_tools", globs(&h.Tools.Deny)),

		// What the server asks of the sessions.
		choice("server_requests", &h.ServerRequests, mux.ServerRequestsAuto, mux.ServerRequestsLatest, mux.ServerRequestsSerialize),
		table("upstream_capabilities", func(d *decoder, p keyPath, t map[string]any) {
			b, err := json.Marshal(t)
			if err != nil {
				d.errorf(p, "cannot be written as JSON: %v", err)
			}
			h.UpstreamCapabilities = b
		}),
		duration("server_request_timeout", &h.ServerRequestTimeout, positive),
		key{"roots", func(d *decoder, p keyPath, v any) { h.Roots, h.RootsFromSessions = d.roots(p, v) }},
		text("default_log_level", func(d *decoder, p keyPath, v string) {
			switch v {
			case "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency":
				h.DefaultLogLevel = v
			default:
				d.errorf(p, "invalid level %q: want debug, info, notice, warning, error, critical, alert or emergency", v)
			}
		}),
	}
}

// globs stores a list of tool globs (allow_tools, deny_tools) in dst.
func globs(dst *[]string) func(d *decoder, p keyPath, l []string) {
	return func(d *decoder, p keyPath, l []string) {
		if slices.Contains(l, "") {
			d.errorf(p, "globs must not be empty strings")
		}
		*dst = l
	}
}

// endpointKeys are the keys of an [endpoints.NAME] table, stored in e.
// known are the configured servers' names.
func endpointKeys(e *endpoint.Config, known []string) []key {
	return []key{
		list("servers", func(d *decoder, p keyPath, names []string) {
			for _, n := range names {
				if !slices.Contains(known, n) {
					d.errorf(p, "unknown server %q: the configured servers are %s", n, strings.Join(known, ", "))
				}
			}
			e.Servers = names
		}),
		list("allow_tools", globs(&e.AllowTools)),
		list("deny_tools", globs(&e.DenyTools)),
		text("separator", func(d *decoder, p keyPath, s string) {
			if s == "" {
				d.errorf(p, "must not be empty (leave it out for %q)", endpoint.DefaultSeparator)
			}
			e.Separator = s
		}),
	}
}

// keyHomes maps each key of the [daemon], [listen] and [servers.NAME]
// tables to its table, for the message about a key in the wrong one.
var keyHomes = sync.OnceValue(func() map[string]string {
	homes := map[string]string{}
	for home, keys := range map[string][]key{
		"[daemon]":       daemonKeys(new(Daemon)),
		"[listen]":       listenKeys(new(Listen)),
		"[servers.NAME]": serverKeys(new(daemon.Server)),
	} {
		for _, k := range keys {
			homes[k.name] = home
		}
	}
	return homes
})

// document decodes the whole file over the defaults.
func (d *decoder) document(doc map[string]any) *Config {
	cfg := defaults()
	for _, name := range slices.Sorted(maps.Keys(doc)) {
		p := keyPath{name}
		switch name {
		case "daemon":
			if t, ok := as[map[string]any](d, p, doc[name], "a table"); ok {
				d.decodeTable(p, t, daemonKeys(&cfg.Daemon))
			}
		case "listen":
			if t, ok := as[map[string]any](d, p, doc[name], "a table"); ok {
				d.listen(p, t, &cfg.Listen)
			}
		case "servers":
			if t, ok := as[map[string]any](d, p, doc[name], "a table"); ok {
				cfg.Servers = d.servers(p, t)
			}
		case "endpoints":
		default:
			d.unknown(p, doc[name], []string{"daemon", "listen", "servers", "endpoints"})
		}
	}
	// Endpoints name servers: they are decoded once the servers are known.
	var endpoints map[string]any
	if v, ok := doc["endpoints"]; ok {
		endpoints, _ = as[map[string]any](d, keyPath{"endpoints"}, v, "a table")
	}
	cfg.Endpoints = d.endpoints(keyPath{"endpoints"}, endpoints, doc, cfg.Servers)
	// max_queued_bytes and outbox_max are compared once both are known.
	p := keyPath{"daemon", "max_queued_bytes"}
	if q := cfg.Daemon.MaxQueuedBytes; q > 0 && q < cfg.Listen.Session.OutboxMax && valueAt(doc, p) != nil && !d.failed(p) {
		d.errorf(p, "%s must be 0 (no bound) or at least [listen] outbox_max (%s), the bound of one session",
			FormatSize(q), FormatSize(cfg.Listen.Session.OutboxMax))
	}
	return cfg
}

// valueAt finds the generic value at path; nil when there is none.
func valueAt(doc map[string]any, path keyPath) any {
	var v any = doc
	for _, k := range path {
		t, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = t[k]
	}
	return v
}

// listen decodes the [listen] table into c.
func (d *decoder) listen(path keyPath, t map[string]any, c *Listen) {
	bad := d.bad
	d.decodeTable(path, t, listenKeys(c))
	c.Web.MaxInflight = c.Session.MaxInflight
	if d.bad == bad {
		if _, ok := t["http_max_streams"]; !ok {
			c.Web.MaxStreams = socket.DefaultMaxStreamsOf(c.Web.MaxConnections)
		}
		if c.Web.MaxStreams >= c.Web.MaxConnections {
			d.errorf(path.with("http_max_streams"), "%d must be smaller than http_max_connections (%d), so that short requests have room",
				c.Web.MaxStreams, c.Web.MaxConnections)
		}
	}
	if c.Web.Metrics && c.Web.Addr == "" {
		d.errorf(path.with("metrics"), "true needs a web listener ([listen] http) to serve /metrics on; the control endpoint serves it without this key")
	}
	// Compare the two only when both are known to be what the user meant.
	if d.bad == bad && c.Session.OutboxMax <= c.Session.OutboxHighWater {
		// Name the key the user wrote: outbox_max if present, else outbox_high_water.
		if _, ok := t["outbox_max"]; ok {
			d.errorf(path.with("outbox_max"), "%s must be larger than outbox_high_water (%s)",
				FormatSize(c.Session.OutboxMax), FormatSize(c.Session.OutboxHighWater))
		} else {
			d.errorf(path.with("outbox_high_water"), "%s must be smaller than outbox_max (default %s); raise outbox_max",
				FormatSize(c.Session.OutboxHighWater), FormatSize(c.Session.OutboxMax))
		}
	}
}

// servers decodes the [servers] table: the servers that have no problems,
// sorted by name.
func (d *decoder) servers(path keyPath, t map[string]any) []daemon.Server {
	var out []daemon.Server
	for _, name := range slices.Sorted(maps.Keys(t)) {
		p := path.with(name)
		st, ok := as[map[string]any](d, p, t[name], "a [servers.NAME] table")
		if !ok {
			continue
		}
		if s, ok := d.server(p, name, st); ok {
			out = append(out, s)
		}
	}
	return out
}

// endpoints decodes the [endpoints] table t (nil when there is none)
// against the servers decoded: the endpoints that have no problems, and
// the implicit endpoint "all" unless t defines it or a server takes the
// name, sorted by name.
func (d *decoder) endpoints(path keyPath, t map[string]any, doc map[string]any, servers []daemon.Server) []endpoint.Config {
	var known []string
	for _, s := range servers {
		known = append(known, s.Name())
	}
	// A server with problems is not among servers, but its name is taken.
	written, _ := doc["servers"].(map[string]any)
	var out []endpoint.Config
	for _, name := range slices.Sorted(maps.Keys(t)) {
		p := path.with(name)
		et, ok := as[map[string]any](d, p, t[name], "an [endpoints.NAME] table")
		if !ok {
			continue
		}
		bad := d.bad
		if !ValidServerName(name) {
			d.errorf(p, "invalid endpoint name: use letters, digits, '.', '_' and '-', "+
				"starting with a letter or digit, at most %d bytes", MaxServerNameLen)
		}
		if _, ok := written[name]; ok {
			d.errorf(p, "the name %q is also a server's (%s, line %d): servers and endpoints share one namespace",
				name, keyPath{"servers", name}, d.line(keyPath{"servers", name}))
		}
		e := endpoint.Config{Name: name}
		d.decodeTable(p, et, endpointKeys(&e, known))
		if _, ok := et["servers"]; !ok {
			d.errorf(p.with("servers"), "missing: every endpoint needs its list of servers")
		}
		if d.bad == bad {
			out = append(out, e)
		}
	}
	_, defined := t[endpoint.All]
	_, taken := written[endpoint.All]
	if !defined && !taken {
		out = append(out, endpoint.Config{Name: endpoint.All, Servers: known})
		slices.SortFunc(out, func(a, b endpoint.Config) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// server decodes one [servers.NAME] table. ok is false when it has
// problems (already recorded).
func (d *decoder) server(path keyPath, name string, t map[string]any) (s daemon.Server, ok bool) {
	bad := d.bad
	if !ValidServerName(name) {
		d.errorf(path, "invalid server name: use letters, digits, '.', '_' and '-', "+
			"starting with a letter or digit, at most %d bytes", MaxServerNameLen)
	}
	s = defaultServer(name)
	d.decodeTable(path, t, serverKeys(&s))
	if _, ok := t["command"]; !ok {
		d.errorf(path.with("command"), "missing: every server needs a command")
	}
	h, u := &s.Hub, &s.Hub.Upstream
	if d.bad == bad && h.RestartBackoffMax < h.RestartBackoff {
		d.errorf(path.with("restart_backoff_max"), "%s is shorter than restart_backoff (%s)", h.RestartBackoffMax, h.RestartBackoff)
	}
	// Compare the two only when both are known to be what the user meant.
	if d.bad == bad && int64(u.WriteQueueBytes) < 2*int64(u.MaxMessageBytes) {
		// Name the key the user wrote: write_queue_bytes if present, else max_message_bytes.
		if _, ok := t["write_queue_bytes"]; ok {
			d.errorf(path.with("write_queue_bytes"), "%s must be at least twice max_message_bytes (%s)",
				FormatSize(u.WriteQueueBytes), FormatSize(u.MaxMessageBytes))
		} else {
			d.errorf(path.with("max_message_bytes"), "%s needs write_queue_bytes of at least twice that (default %s); set write_queue_bytes",
				FormatSize(u.MaxMessageBytes), FormatSize(u.WriteQueueBytes))
		}
	}
	return s, d.bad == bad
}
