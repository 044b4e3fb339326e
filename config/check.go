package config

import (
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
	"github.com/mcpmux/mcpmux/streamable"
	"github.com/mcpmux/mcpmux/upstream"
)

// The defaults of keys absent from the file. Where a library package fills
// a zero value, its exported default is taken (the config shows the values,
// and compares outbox_high_water with outbox_max). The others (autostart,
// max_restarts, write_queue_bytes, write_stall_timeout, max_sessions) are
// the config's own: the libraries' zero means something else (no limit,
// off, twice the message size).
func defaultConfig() *Config {
	dir, note := DefaultSocketDir(os.Getuid())
	return &Config{
		Daemon: Daemon{LogLevel: slog.LevelInfo, LogFormat: "text", Autostart: true,
			FirstByteTimeout: daemon.DefaultFirstByteTimeout, LineTimeout: daemon.DefaultLineTimeout, MaxQueuedBytes: daemon.DefaultMaxQueuedBytes,
			MaxHTTPSessions: streamable.DefaultMaxSessions},
		Listen: Listen{
			SocketDir:       dir,
			SocketDirNote:   note,
			MaxInflight:     session.DefaultMaxInflight,
			OutboxHighWater: session.DefaultOutboxHighWater,
			OutboxMax:       session.DefaultOutboxMax,

			MaxStreamsPerConn: socket.DefaultMaxStreams,
			HTTPSessionIdle:   streamable.DefaultSessionIdle,

			HTTPMaxConnections: socket.DefaultMaxConnections,
			HTTPMaxStreams:     socket.DefaultMaxStreamsOf(socket.DefaultMaxConnections),
			HTTPMaxListens:     streamable.DefaultMaxListens,
			DrainTimeout:       session.DefaultDrainTimeout,
		},
	}
}

func defaultServer(name string) Server {
	return Server{
		Name:            name,
		Stderr:          upstream.StderrLog.String(),
		StdinGrace:      upstream.DefaultStdinGrace,
		TermGrace:       upstream.DefaultTermGrace,
		StartTimeout:    mux.DefaultStartTimeout,
		MaxMessageBytes: upstream.DefaultMaxMessageBytes,
		MaxJunkLines:    upstream.DefaultMaxJunkLines,
		WriteQueueBytes: 64 << 20,

		RestartBackoff:    mux.DefaultRestartBackoff,
		RestartBackoffMax: mux.DefaultRestartBackoffMax,
		RestartWindow:     mux.DefaultRestartWindow,
		MaxRestarts:       5,
		WriteStallTimeout: 60 * time.Second,
		PingFailures:      mux.DefaultPingFailures,

		MaxSessions:          1024,
		ServerRequests:       mux.ServerRequestsAuto,
		ServerRequestTimeout: mux.DefaultServerRequestTimeout,
		DefaultLogLevel:      mux.DefaultSessionLogLevel,
		InitTimeout:          mux.DefaultInitializeTimeout,
		Protocol:             mux.ProtocolAuto,
	}
}

// DefaultSocketDir is the socket folder when socket_dir is not set: one
// that depends on the user alone (socket.DefaultDir), never on variables
// the clients that start `mcpmux connect` strip from its environment, so
// that the daemon and every client agree. note, when not empty, says why
// it is not the usual folder.
func DefaultSocketDir(uid int) (dir, note string) {
	dir, note, err := socket.DefaultDir(uid, Home(uid))
	if err != nil {
		return "/tmp/mcpmux-" + strconv.Itoa(uid), err.Error()
	}
	return dir, note
}

// Home is the user's home folder: the account's, else $HOME. The
// account's comes first: a client may have been started without HOME.
func Home(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && filepath.IsAbs(u.HomeDir) {
		return u.HomeDir
	}
	return os.Getenv("HOME")
}

// document checks the decoded file and fills in the defaults.
func (d *decoder) document(f *fileDoc) *Config {
	cfg := defaultConfig()
	if f.Daemon != nil {
		d.daemon(keyPath{"daemon"}, f.Daemon, &cfg.Daemon)
	}
	if f.Listen != nil {
		d.listen(keyPath{"listen"}, f.Listen, &cfg.Listen)
	}
	for name, fs := range f.Servers {
		if fs == nil {
			fs = &fileServer{}
		}
		if s, ok := d.server(keyPath{"servers", name}, name, fs); ok {
			cfg.Servers = append(cfg.Servers, s)
		}
	}
	slices.SortFunc(cfg.Servers, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	if q := cfg.Daemon.MaxQueuedBytes; q > 0 && q < cfg.Listen.OutboxMax && f.Daemon != nil && f.Daemon.MaxQueuedBytes != nil {
		d.errorf(keyPath{"daemon", "max_queued_bytes"}, "%s must be 0 (no bound) or at least [listen] outbox_max (%s), the bound of one session",
			FormatSize(q), FormatSize(cfg.Listen.OutboxMax))
	}
	return cfg
}

// daemon checks the [daemon] table into c.
func (d *decoder) daemon(path keyPath, f *fileDaemon, c *Daemon) {
	if f.LogLevel != nil {
		levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
		if l, ok := levels[*f.LogLevel]; ok {
			c.LogLevel = l
		} else {
			d.errorf(path.with("log_level"), `invalid log level %q: want "debug", "info", "warn" or "error"`, *f.LogLevel)
		}
	}
	if f.LogFormat != nil {
		if *f.LogFormat == "text" || *f.LogFormat == "json" {
			c.LogFormat = *f.LogFormat
		} else {
			d.errorf(path.with("log_format"), `invalid log format %q: want "text" or "json"`, *f.LogFormat)
		}
	}
	set(&c.Autostart, f.Autostart)
	d.setDuration(path.with("idle_exit"), &c.IdleExit, f.IdleExit, false)
	d.setDuration(path.with("first_byte_timeout"), &c.FirstByteTimeout, f.FirstByteTimeout, false)
	d.setDuration(path.with("line_timeout"), &c.LineTimeout, f.LineTimeout, false)
	d.setSize(path.with("max_queued_bytes"), &c.MaxQueuedBytes, f.MaxQueuedBytes)
	d.setCount(path.with("max_http_sessions"), &c.MaxHTTPSessions, f.MaxHTTPSessions, 1)
}

// listen checks the [listen] table into c.
func (d *decoder) listen(path keyPath, f *fileListen, c *Listen) {
	nerrs := len(d.errs)
	if f.SocketDir != nil {
		if *f.SocketDir == "" {
			d.errorf(path.with("socket_dir"), "must not be empty (leave it out for the default)")
		} else {
			c.SocketDir, c.SocketDirNote = d.resolve(*f.SocketDir), ""
		}
	}
	if f.HTTP != nil {
		if _, port, err := net.SplitHostPort(*f.HTTP); err != nil || port == "" {
			d.errorf(path.with("http"), "invalid address %q: want host:port, such as 127.0.0.1:7878", *f.HTTP)
		} else {
			c.HTTP = *f.HTTP
		}
	}
	set(&c.HTTPToken, f.HTTPToken)
	set(&c.HTTPAllowRemote, f.HTTPAllowRemote)
	if slices.Contains(f.HTTPOrigins, "") {
		d.errorf(path.with("http_origins"), "origins must not be empty strings")
	} else if f.HTTPOrigins != nil {
		c.HTTPOrigins = f.HTTPOrigins
	}
	d.setCount(path.with("max_streams_per_conn"), &c.MaxStreamsPerConn, f.MaxStreamsPerConn, 1)
	d.setDuration(path.with("http_session_idle"), &c.HTTPSessionIdle, f.HTTPSessionIdle, true)
	d.setCount(path.with("http_max_connections"), &c.HTTPMaxConnections, f.HTTPMaxConnections, 1)
	c.HTTPMaxStreams = socket.DefaultMaxStreamsOf(c.HTTPMaxConnections)
	d.setCount(path.with("http_max_streams"), &c.HTTPMaxStreams, f.HTTPMaxStreams, 1)
	if len(d.errs) == nerrs && c.HTTPMaxStreams >= c.HTTPMaxConnections {
		d.errorf(path.with("http_max_streams"), "%d must be smaller than http_max_connections (%d), so that short requests have room",
			c.HTTPMaxStreams, c.HTTPMaxConnections)
	}
	d.setCount(path.with("http_max_listens"), &c.HTTPMaxListens, f.HTTPMaxListens, 1)
	d.setDuration(path.with("drain_timeout"), &c.DrainTimeout, f.DrainTimeout, true)
	d.setCount(path.with("max_inflight"), &c.MaxInflight, f.MaxInflight, 1)
	d.setSize(path.with("outbox_high_water"), &c.OutboxHighWater, f.OutboxHighWater)
	d.setSize(path.with("outbox_max"), &c.OutboxMax, f.OutboxMax)
	// Compare the two only when both are known to be what the user meant.
	if len(d.errs) == nerrs && c.OutboxMax <= c.OutboxHighWater {
		// Name the key the user wrote: outbox_max if present, else outbox_high_water.
		if f.OutboxMax != nil {
			d.errorf(path.with("outbox_max"), "%s must be larger than outbox_high_water (%s)",
				FormatSize(c.OutboxMax), FormatSize(c.OutboxHighWater))
		} else {
			d.errorf(path.with("outbox_high_water"), "%s must be smaller than outbox_max (default %s); raise outbox_max",
				FormatSize(c.OutboxHighWater), FormatSize(c.OutboxMax))
		}
	}
}

// server checks one [servers.NAME] table. ok is false when it has
// problems (already recorded).
func (d *decoder) server(path keyPath, name string, f *fileServer) (s Server, ok bool) {
	nerrs := len(d.errs)
	if !ValidServerName(name) {
		d.errorf(path, "invalid server name: use letters, digits, '.', '_' and '-', "+
			"starting with a letter or digit, at most %d bytes", MaxServerNameLen)
	}
	s = defaultServer(name)
	d.process(path, f, &s)
	d.supervision(path, f, &s)
	d.serverRequests(path, f, &s)
	if len(d.errs) == nerrs && s.RestartBackoffMax < s.RestartBackoff {
		d.errorf(path.with("restart_backoff_max"), "%s is shorter than restart_backoff (%s)", s.RestartBackoffMax, s.RestartBackoff)
	}
	// Compare the two only when both are known to be what the user meant.
	if len(d.errs) == nerrs && int64(s.WriteQueueBytes) < 2*int64(s.MaxMessageBytes) {
		// Name the key the user wrote: write_queue_bytes if present, else max_message_bytes.
		if f.WriteQueueBytes != nil {
			d.errorf(path.with("write_queue_bytes"), "%s must be at least twice max_message_bytes (%s)",
				FormatSize(s.WriteQueueBytes), FormatSize(s.MaxMessageBytes))
		} else {
			d.errorf(path.with("max_message_bytes"), "%s needs write_queue_bytes of at least twice that (default %s); set write_queue_bytes",
				FormatSize(s.MaxMessageBytes), FormatSize(s.WriteQueueBytes))
		}
	}
	return s, len(d.errs) == nerrs
}

// process checks the keys of how the server's process runs: command,
// arguments, environment, folder, stderr, stop graces, output limits.
func (d *decoder) process(path keyPath, f *fileServer, s *Server) {
	if f.Command == nil {
		d.errorf(path.with("command"), "missing: every server needs a command")
	} else {
		s.Command = d.command(path.with("command"), *f.Command)
	}
	if slices.ContainsFunc(f.Args, hasNUL) {
		d.errorf(path.with("args"), "arguments must not contain NUL bytes")
	}
	s.Args = f.Args
	s.Env = d.env(path.with("env"), f.Env)
	for _, n := range f.InheritEnv {
		if !ValidEnvName(n) {
			d.errorf(path.with("inherit_env"), "invalid variable name %q: it must be non-empty, without '=' or NUL", n)
		}
	}
	s.InheritEnv = f.InheritEnv
	if f.Cwd != nil {
		s.Cwd = d.cwd(path.with("cwd"), *f.Cwd)
	}
	if f.Stderr != nil {
		s.Stderr, s.StderrPath = d.stderr(path.with("stderr"), *f.Stderr)
	}
	d.setDuration(path.with("stdin_grace"), &s.StdinGrace, f.StdinGrace, false)
	d.setDuration(path.with("term_grace"), &s.TermGrace, f.TermGrace, false)
	if n, ok := d.sizeOf(path.with("max_message_bytes"), f.MaxMessageBytes); ok {
		if n < minMaxMessageBytes || n > maxMaxMessageBytes {
			d.errorf(path.with("max_message_bytes"), "%s is out of range: want %s to %s",
				FormatSize(n), FormatSize(minMaxMessageBytes), FormatSize(maxMaxMessageBytes))
		} else {
			s.MaxMessageBytes = n
		}
	}
	d.setCount(path.with("max_junk_lines"), &s.MaxJunkLines, f.MaxJunkLines, 0)
	d.setSize(path.with("write_queue_bytes"), &s.WriteQueueBytes, f.WriteQueueBytes)
	d.setDuration(path.with("write_stall_timeout"), &s.WriteStallTimeout, f.WriteStallTimeout, false)
}

// supervision checks the keys of how the router keeps the server up.
func (d *decoder) supervision(path keyPath, f *fileServer, s *Server) {
	d.setDuration(path.with("start_timeout"), &s.StartTimeout, f.StartTimeout, true)
	d.setDuration(path.with("initialize_timeout"), &s.InitTimeout, f.InitTimeout, true)
	if f.Protocol != nil {
		switch p := *f.Protocol; p {
		case mux.ProtocolAuto, mux.ProtocolLegacy, mux.ProtocolModern:
			s.Protocol = p
		default:
			d.errorf(path.with("protocol"), `invalid value %q: want "auto", "legacy" or "modern"`, p)
		}
	}
	d.setDuration(path.with("restart_backoff"), &s.RestartBackoff, f.RestartBackoff, true)
	d.setDuration(path.with("restart_backoff_max"), &s.RestartBackoffMax, f.RestartBackoffMax, true)
	d.setDuration(path.with("restart_window"), &s.RestartWindow, f.RestartWindow, true)
	d.setCount(path.with("max_restarts"), &s.MaxRestarts, f.MaxRestarts, 0)
	d.setDuration(path.with("ping_interval"), &s.PingInterval, f.PingInterval, false)
	d.setCount(path.with("ping_failures"), &s.PingFailures, f.PingFailures, 1)
	d.setDuration(path.with("request_timeout"), &s.RequestTimeout, f.RequestTimeout, false)
	d.setDuration(path.with("idle_timeout"), &s.IdleTimeout, f.IdleTimeout, false)
	d.setCount(path.with("max_sessions"), &s.MaxSessions, f.MaxSessions, 1)
	d.setCount(path.with("max_concurrency"), &s.MaxConcurrency, f.MaxConcurrency, 1)
	s.Lazy = d.choice(path.with("start"), f.Start, "eager", "lazy")
	if f.Share != nil {
		switch share := *f.Share; share {
		case mux.ShareShared, mux.ShareIsolated, mux.ShareProject:
			s.Share = share
		default:
			d.errorf(path.with("share"), `invalid value %q: want "shared", "isolated" or "project"`, share)
		}
	}
	if f.ProjectMarkers != nil {
		for _, m := range f.ProjectMarkers {
			if m == "" || strings.ContainsRune(m, '/') || m == "." || m == ".." {
				d.errorf(path.with("project_markers"), "invalid marker %q: a file or folder name, such as \".git\"", m)
			}
		}
		s.ProjectMarkers = f.ProjectMarkers
	}
}

// serverRequests checks the keys of what the server asks of the sessions.
func (d *decoder) serverRequests(path keyPath, f *fileServer, s *Server) {
	if f.ServerRequests != nil {
		switch mode := *f.ServerRequests; mode {
		case mux.ServerRequestsAuto, mux.ServerRequestsLatest, mux.ServerRequestsSerialize:
			s.ServerRequests = mode
		default:
			d.errorf(path.with("server_requests"), "invalid value %q: want \"auto\", \"latest\" or \"serialize\"", mode)
		}
	}
	if f.UpstreamCaps != nil {
		b, err := json.Marshal(f.UpstreamCaps)
		if err != nil {
			d.errorf(path.with("upstream_capabilities"), "cannot be written as JSON: %v", err)
		}
		s.UpstreamCaps = b
	}
	d.setDuration(path.with("server_request_timeout"), &s.ServerRequestTimeout, f.ServerRequestTimeout, true)
	if f.Roots != nil {
		s.Roots, s.RootsFromSessions = d.roots(path.with("roots"), f.Roots)
	}
	if f.DefaultLogLevel != nil {
		switch lvl := *f.DefaultLogLevel; lvl {
		case "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency":
			s.DefaultLogLevel = lvl
		default:
			d.errorf(path.with("default_log_level"), "invalid level %q: want debug, info, notice, warning, error, critical, alert or emergency", lvl)
		}
	}
}

// roots checks roots: "sessions", or an array of file:// URIs.
func (d *decoder) roots(p keyPath, v any) (list []string, fromSessions bool) {
	if str, isStr := v.(string); isStr {
		if str != "sessions" {
			d.errorf(p, "invalid value %q: want \"sessions\" or an array of root URIs", str)
		}
		return nil, str == "sessions"
	}
	list, ok := d.strs(p, v)
	if !ok {
		return nil, false
	}
	for _, r := range list {
		if !strings.HasPrefix(r, "file://") {
			d.errorf(p, "invalid root %q: roots are file:// URIs", r)
		}
	}
	return list, false
}

// env checks a server's env table: variable names to string values.
func (d *decoder) env(p keyPath, t map[string]string) map[string]string {
	if t == nil {
		return nil
	}
	env := make(map[string]string, len(t))
	for name, v := range t {
		switch vp := p.with(name); {
		case !ValidEnvName(name):
			d.errorf(vp, "invalid variable name: it must be non-empty, without '=' or NUL")
		case hasNUL(v):
			d.errorf(vp, "must not contain NUL bytes")
		default:
			env[name] = v
		}
	}
	return env
}

// choice checks a key of two values: false for the first (the default),
// true for the second.
func (d *decoder) choice(p keyPath, v *string, first, second string) bool {
	if v == nil || *v == first {
		return false
	}
	if *v != second {
		d.errorf(p, "invalid value %q: want %q or %q", *v, first, second)
	}
	return *v == second
}

// set copies a value that is present.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// setDuration sets a duration that is present and valid; positive refuses
// zero.
func (d *decoder) setDuration(p keyPath, dst *time.Duration, v *string, positive bool) {
	if v == nil {
		return
	}
	dur, ok := d.duration(p, *v)
	if ok && positive && dur == 0 {
		d.errorf(p, "must be longer than zero")
		return
	}
	if ok {
		*dst = dur
	}
}

// setCount sets an integer that is present and at least least (0 or 1).
func (d *decoder) setCount(p keyPath, dst *int, v *int, least int) {
	switch {
	case v == nil:
	case *v < least && least == 0:
		d.errorf(p, "must not be negative (got %d)", *v)
	case *v < least:
		d.errorf(p, "must be at least %d (got %d)", least, *v)
	default:
		*dst = *v
	}
}

// setSize sets a size that is present and valid.
func (d *decoder) setSize(p keyPath, dst *int, v any) {
	if n, ok := d.sizeOf(p, v); ok {
		*dst = n
	}
}

// sizeOf checks a size that is present; ok is false when it is absent or
// wrong.
func (d *decoder) sizeOf(p keyPath, v any) (int, bool) {
	if v == nil {
		return 0, false
	}
	return d.size(p, v)
}
