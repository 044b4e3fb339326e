package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The file format is described in DESIGN.md, "Contracts" -> "Config". Parsing
// happens in two passes over the same bytes: go-toml decodes the document into
// generic values (and so enforces TOML itself: syntax, duplicate keys and
// tables, redefinitions), and go-toml's unstable parser walks it again only to
// learn the line of every key. Validation then checks the generic values
// against our schema and reports each problem as "file:line: dotted.key: what".

// maxConfigSize bounds the file we are willing to read: a real config is a
// few kilobytes.
const maxConfigSize = 1 << 20

// Defaults for keys that are absent from the file.
const (
	defaultLogFormat       = "text"
	defaultMaxInflight     = 256
	defaultOutboxHighWater = 1 << 20
	defaultOutboxMax       = 64 << 20
	defaultHTTPSessionIdle = 30 * time.Minute
	defaultStderr          = "log"
	defaultStdinGrace      = 2 * time.Second
	defaultTermGrace       = 2 * time.Second
	defaultStartTimeout    = 30 * time.Second
	defaultMaxMessageBytes = 16 << 20
	defaultMaxJunkLines    = 10
	defaultWriteQueueBytes = 64 << 20

	minMaxMessageBytes = 1 << 10
	maxMaxMessageBytes = 1 << 30
	maxServerNameLen   = 64
)

// config is a parsed and validated config file. Every field holds its final
// value: defaults are filled in and relative paths are already absolute.
type config struct {
	Path    string // absolute path of the file; "" when parsed from bytes with no name
	Daemon  daemonConfig
	Listen  listenConfig
	Servers []serverConfig // sorted by Name
}

// daemonConfig is the [daemon] table: how the daemon itself logs.
type daemonConfig struct {
	LogLevel  slog.Level    // log_level: "debug", "info" (default), "warn" or "error"
	LogFormat string        // log_format: "text" (default) or "json"
	Autostart bool          // autostart: `connect` starts a daemon when none answers; default true
	IdleExit  time.Duration // idle_exit: stop after this long without sessions; default 0 = never
}

// listenConfig is the [listen] table: where clients reach the daemon, and
// the flow-control limits applied to every client session.
type listenConfig struct {
	SocketDir         string   // socket_dir: absolute; default $XDG_RUNTIME_DIR/mcpmux, else /tmp/mcpmux-<uid>
	HTTP              string   // http: host:port of the web listener; "" = no web listener
	HTTPToken         string   // http_token: "" = generated and kept by the daemon
	HTTPOrigins       []string // http_origins: browser Origins allowed; none by default
	MaxInflight       int      // max_inflight: requests in flight per session before it is no longer read; default 256
	OutboxHighWater   int      // outbox_high_water: bytes queued to a client before it is no longer read; default 1MiB
	OutboxMax         int      // outbox_max: bytes queued to a client before it is evicted; default 64MiB
	HTTPAllowRemote   bool     // http_allow_remote: serve the web listener beyond loopback; default false
	MaxStreamsPerConn int      // max_streams_per_conn: yamux streams per Unix connection; default 256

	HTTPSessionIdle time.Duration // http_session_idle: a Streamable HTTP session without requests this long ends; default 30m
}

// serverConfig is one [servers.NAME] table: an MCP server run over stdio.
type serverConfig struct {
	Name            string            // the table name; also the socket's name
	Command         string            // executable: absolute, or a bare name looked up in PATH at each start
	Args            []string          // args
	Env             map[string]string // env: variables set for the server
	InheritEnv      []string          // inherit_env: variables passed through from the daemon's environment
	Cwd             string            // cwd: absolute existing folder; "" = the daemon's working folder
	Stderr          string            // "log" (default), "inherit", "discard" or "file"
	StderrPath      string            // absolute file for Stderr == "file" (from stderr = "file:PATH")
	StdinGrace      time.Duration     // stdin_grace: wait after closing stdin before SIGTERM; default 2s
	TermGrace       time.Duration     // term_grace: wait after SIGTERM before SIGKILL; default 2s
	StartTimeout    time.Duration     // start_timeout: how long sessions wait for a starting server; default 30s
	MaxMessageBytes int               // max_message_bytes: largest message either way; default 16MiB
	MaxJunkLines    int               // max_junk_lines: non-JSON-RPC stdout lines tolerated in a row; default 10
	WriteQueueBytes int               // write_queue_bytes: bytes queued towards the server's stdin; default 64MiB

	RestartBackoff    time.Duration // restart_backoff: first delay before a restart; default 250ms
	RestartBackoffMax time.Duration // restart_backoff_max: cap of that delay; default 30s
	RestartWindow     time.Duration // restart_window: uptime that resets the backoff, and the crash-loop window; default 60s
	MaxRestarts       int           // max_restarts: crashes within restart_window before the server is failed; default 5, 0 = no limit
	WriteStallTimeout time.Duration // write_stall_timeout: a server that accepts no input for this long is stalled; default 60s, 0 = off
	PingInterval      time.Duration // ping_interval: liveness pings; default 0 = off
	PingFailures      int           // ping_failures: missed pings in a row that restart the server; default 3
	RequestTimeout    time.Duration // request_timeout: fail and cancel a request unanswered this long; default 0 = none
	Lazy              bool          // start: "eager" (default) or "lazy" (at the first session)
	IdleTimeout       time.Duration // idle_timeout: stop the server after this long without sessions; default 0 = never

	MaxSessions          int           // max_sessions: sessions at once; default 1024
	ServerRequests       string        // server_requests: "latest" (default) or "serialize"
	ServerRequestTimeout time.Duration // server_request_timeout: how long a session has to answer the server; default 60s
	Roots                []string      // roots = ["file:///...", ...]: answered by mcpmux
	RootsFromSessions    bool          // roots = "sessions": the union of the sessions' roots
	DefaultLogLevel      string        // default_log_level: the level of sessions that set none; default "info"
	Isolated             bool          // share = "isolated": one process per session; default "shared"
}

// defaultConfigPath returns where the config is read from when no path is
// given: $MCPMUX_CONFIG, else $XDG_CONFIG_HOME/mcpmux/mux.toml, else
// $HOME/.config/mcpmux/mux.toml. As the XDG spec asks, a relative
// XDG_CONFIG_HOME is ignored. getenv is os.Getenv outside tests.
func defaultConfigPath(getenv func(string) string) (string, error) {
	if p := getenv("MCPMUX_CONFIG"); p != "" {
		return p, nil
	}
	if dir := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "mcpmux", "mux.toml"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "mcpmux", "mux.toml"), nil
	}
	return "", errors.New("no config file: set MCPMUX_CONFIG, XDG_CONFIG_HOME or HOME, or pass --config")
}

// loadConfig reads the config file at path, then parses and validates it
// like parseConfig, resolving relative paths against the file's folder.
// Every error names the file.
func loadConfig(path string) (*config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	// Read one byte past the limit, so that parseConfig sees an oversized file.
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("load config: read %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return parseConfig(data, path, filepath.Dir(abs))
}

// parseConfig parses and validates a config file held in data. name is the
// file's name, used in error messages and to set config.Path (as a file in
// dir, unless it is absolute); dir is the folder relative paths in the file
// are resolved against ("" means the working folder). All problems found are
// returned together, one *configError each, in line order.
func parseConfig(data []byte, name, dir string) (*config, error) {
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("%s: config file is larger than %s", cmp.Or(name, "config"), formatSize(maxConfigSize))
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: resolve folder %q: %w", cmp.Or(name, "config"), dir, err)
	}

	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, tomlError(name, data, err)
	}
	idx, err := indexKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmp.Or(name, "config"), err)
	}

	d := &decoder{file: name, dir: absDir, lines: idx.lines}
	cfg := d.document(doc)
	if len(d.errs) > 0 {
		slices.SortStableFunc(d.errs, func(a, b *configError) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Key, b.Key))
		})
		errs := make([]error, len(d.errs))
		for i, e := range d.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	switch {
	case name == "":
	case filepath.IsAbs(name):
		cfg.Path = filepath.Clean(name)
	default:
		cfg.Path = filepath.Join(absDir, filepath.Base(name))
	}
	return cfg, nil
}

// configError is one problem in a config file, located by line and key.
type configError struct {
	File string // the name given to parseConfig; may be ""
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path, such as servers.memory.stdin_grace; may be ""
	Msg  string
}

// Error formats the problem as "file:line: key: message", leaving out the
// parts that are unknown.
func (e *configError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// tomlError turns a go-toml error (bad syntax, a key or table defined twice)
// into a configError carrying its line and, when there is one, the key's
// full path. go-toml gives a key-value's key relative to its table, so the
// table in effect on that line is put in front.
func tomlError(file string, data []byte, err error) error {
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return fmt.Errorf("%s: %w", cmp.Or(file, "config"), err)
	}
	line, _ := de.Position()
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	key := keyPath(de.Key())
	if len(key) == 0 {
		msg = "invalid TOML: " + msg
	} else if idx, err := indexKeys(data); err == nil {
		if table, ok := idx.tables[line]; ok {
			key = append(slices.Clip(table), key...)
		}
	}
	return &configError{File: file, Line: line, Key: key.String(), Msg: msg}
}

// keyPath is a key's full path from the document root, one element per part.
type keyPath []string

// with returns the path of the child key k; p itself is never modified.
func (p keyPath) with(k string) keyPath {
	return append(slices.Clip(p), k)
}

// id is the path as a map key; unlike String, it cannot be ambiguous.
func (p keyPath) id() string {
	return strings.Join(p, "\x00")
}

// String writes the path the way it could appear in TOML: parts joined by
// dots, quoting those that are not bare keys (servers."my server").
func (p keyPath) String() string {
	parts := make([]string, len(p))
	for i, k := range p {
		parts[i] = k
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return !isBareKeyRune(r) }) {
			parts[i] = strconv.Quote(k)
		}
	}
	return strings.Join(parts, ".")
}

// isBareKeyRune reports whether r may appear in an unquoted TOML key.
func isBareKeyRune(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}

// keyIndex locates keys in a document.
type keyIndex struct {
	// lines maps the id of every key path to the line where the path first
	// appears: a table header, a (dotted) key, or a key inside an inline
	// table. Implicitly created parents get the line of their first child.
	lines map[string]int
	// tables maps the line of each top-level key-value to the path of the
	// table it is in (nil for the root table).
	tables map[int]keyPath
}

// indexKeys walks a document with go-toml's unstable parser to build its
// keyIndex. It does not check TOML semantics such as duplicate keys.
func indexKeys(data []byte) (*keyIndex, error) {
	var newlines []int
	for i, c := range data {
		if c == '\n' {
			newlines = append(newlines, i)
		}
	}
	lineAt := func(offset uint32) int {
		n, _ := slices.BinarySearch(newlines, int(offset))
		return n + 1
	}

	idx := &keyIndex{lines: make(map[string]int), tables: make(map[int]keyPath)}
	lines := idx.lines
	// addKey records each part of a (dotted) key under base and returns the full path.
	addKey := func(base keyPath, it unstable.Iterator) keyPath {
		p := slices.Clip(base)
		for it.Next() {
			k := it.Node()
			p = append(p, string(k.Data))
			if _, seen := lines[p.id()]; !seen {
				lines[p.id()] = lineAt(k.Raw.Offset)
			}
		}
		return p
	}
	var addKeyValue func(base keyPath, kv *unstable.Node)
	addKeyValue = func(base keyPath, kv *unstable.Node) {
		p := addKey(base, kv.Key())
		if v := kv.Value(); v.Kind == unstable.InlineTable {
			for it := v.Children(); it.Next(); {
				if c := it.Node(); c.Kind == unstable.KeyValue {
					addKeyValue(p, c)
				}
			}
		}
	}

	var p unstable.Parser
	p.Reset(data)
	var table keyPath
	for p.NextExpression() {
		switch e := p.Expression(); e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = addKey(nil, e.Key())
		case unstable.KeyValue:
			idx.tables[lineAt(e.Raw.Offset)] = table
			addKeyValue(table, e)
		}
	}
	if err := p.Error(); err != nil {
		// go-toml already accepted the document, so this is not expected.
		return nil, fmt.Errorf("invalid TOML: %w", err)
	}
	return idx, nil
}

// decoder checks generic TOML values against the schema, collecting one
// configError per problem rather than stopping at the first.
type decoder struct {
	file  string         // for messages
	dir   string         // absolute; relative paths resolve against it
	lines map[string]int // from keyIndex
	errs  []*configError
}

// line returns the line of path, or of its nearest ancestor that has one.
func (d *decoder) line(path keyPath) int {
	for p := path; len(p) > 0; p = p[:len(p)-1] {
		if n, ok := d.lines[p.id()]; ok {
			return n
		}
	}
	return 0
}

// errorf records a problem with the key at path.
func (d *decoder) errorf(path keyPath, format string, args ...any) {
	d.errs = append(d.errs, &configError{
		File: d.file,
		Line: d.line(path),
		Key:  path.String(),
		Msg:  fmt.Sprintf(format, args...),
	})
}

// unknown records a key that has no place where it is. home is the table
// the key belongs to, if it names a key of some other table.
func (d *decoder) unknown(path keyPath) {
	home := ""
	switch path[len(path)-1] {
	case "log_level", "log_format", "autostart", "idle_exit":
		home = "[daemon]"
	case "socket_dir", "http", "http_token", "http_origins", "max_inflight", "outbox_high_water", "outbox_max",
		"http_allow_remote", "max_streams_per_conn", "http_session_idle":
		home = "[listen]"
	case "command", "args", "env", "inherit_env", "cwd", "stderr", "stdin_grace", "term_grace",
		"start_timeout", "max_message_bytes", "max_junk_lines", "write_queue_bytes",
		"restart_backoff", "restart_backoff_max", "restart_window", "max_restarts", "write_stall_timeout",
		"ping_interval", "ping_failures", "request_timeout", "start", "idle_timeout",
		"max_sessions", "server_requests", "server_request_timeout", "roots", "default_log_level", "share":
		home = "[servers.NAME]"
	}
	switch {
	case home != "":
		d.errorf(path, "unknown key here (it belongs in %s)", home)
	case len(path) == 1:
		d.errorf(path, "unknown key (the file has [daemon], [listen] and [servers.NAME] tables)")
	default:
		d.errorf(path, "unknown key")
	}
}

// document decodes the whole file.
func (d *decoder) document(doc map[string]any) *config {
	cfg := &config{
		Daemon: daemonConfig{LogLevel: slog.LevelInfo, LogFormat: defaultLogFormat, Autostart: true},
		Listen: listenConfig{
			SocketDir:       defaultSocketDir(os.Getenv, os.Getuid()),
			MaxInflight:     defaultMaxInflight,
			OutboxHighWater: defaultOutboxHighWater,
			OutboxMax:       defaultOutboxMax,

			MaxStreamsPerConn: 256,
			HTTPSessionIdle:   defaultHTTPSessionIdle,
		},
	}
	for key, v := range doc {
		path := keyPath{key}
		switch key {
		case "daemon":
			if t, ok := d.table(path, v); ok {
				d.daemon(path, t, &cfg.Daemon)
			}
		case "listen":
			if t, ok := d.table(path, v); ok {
				d.listen(path, t, &cfg.Listen)
			}
		case "servers":
			t, ok := d.table(path, v)
			if !ok {
				break
			}
			for name, v := range t {
				sp := path.with(name)
				st, ok := v.(map[string]any)
				if !ok {
					d.errorf(sp, "must be a [servers.NAME] table (got %s)", tomlType(v))
					continue
				}
				if s, ok := d.server(sp, name, st); ok {
					cfg.Servers = append(cfg.Servers, s)
				}
			}
		default:
			d.unknown(path)
		}
	}
	slices.SortFunc(cfg.Servers, func(a, b serverConfig) int { return strings.Compare(a.Name, b.Name) })
	return cfg
}

// defaultSocketDir is $XDG_RUNTIME_DIR/mcpmux when that variable holds an
// absolute path, else /tmp/mcpmux-<uid>.
func defaultSocketDir(getenv func(string) string, uid int) string {
	if dir := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "mcpmux")
	}
	return "/tmp/mcpmux-" + strconv.Itoa(uid)
}

// daemon decodes the [daemon] table into c.
func (d *decoder) daemon(path keyPath, t map[string]any, c *daemonConfig) {
	for key, v := range t {
		p := path.with(key)
		switch key {
		case "log_level":
			s, ok := d.str(p, v)
			if !ok {
				break
			}
			switch s {
			case "debug":
				c.LogLevel = slog.LevelDebug
			case "info":
				c.LogLevel = slog.LevelInfo
			case "warn":
				c.LogLevel = slog.LevelWarn
			case "error":
				c.LogLevel = slog.LevelError
			default:
				d.errorf(p, `invalid log level %q: want "debug", "info", "warn" or "error"`, s)
			}
		case "log_format":
			s, ok := d.str(p, v)
			if !ok {
				break
			}
			if s != "text" && s != "json" {
				d.errorf(p, `invalid log format %q: want "text" or "json"`, s)
				break
			}
			c.LogFormat = s
		case "autostart":
			if b, ok := d.boolean(p, v); ok {
				c.Autostart = b
			}
		case "idle_exit":
			if dur, ok := d.duration(p, v); ok {
				c.IdleExit = dur
			}
		default:
			d.unknown(p)
		}
	}
}

// listen decodes the [listen] table into c.
func (d *decoder) listen(path keyPath, t map[string]any, c *listenConfig) {
	nerrs := len(d.errs)
	for key, v := range t {
		p := path.with(key)
		switch key {
		case "socket_dir":
			s, ok := d.str(p, v)
			if !ok {
				break
			}
			if s == "" {
				d.errorf(p, "must not be empty (leave it out for the default)")
				break
			}
			c.SocketDir = d.resolve(s)
		case "http":
			s, ok := d.str(p, v)
			if !ok {
				break
			}
			if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
				d.errorf(p, "invalid address %q: want host:port, such as 127.0.0.1:7878", s)
				break
			}
			c.HTTP = s
		case "http_token":
			if s, ok := d.str(p, v); ok {
				c.HTTPToken = s
			}
		case "http_allow_remote":
			if b, ok := d.boolean(p, v); ok {
				c.HTTPAllowRemote = b
			}
		case "max_streams_per_conn":
			if n, ok := d.atLeastOne(p, v); ok {
				c.MaxStreamsPerConn = n
			}
		case "http_session_idle":
			if dur, ok := d.longerThanZero(p, v); ok {
				c.HTTPSessionIdle = dur
			}
		case "http_origins":
			list, ok := d.strs(p, v)
			if !ok {
				break
			}
			if slices.Contains(list, "") {
				d.errorf(p, "origins must not be empty strings")
				break
			}
			c.HTTPOrigins = list
		case "max_inflight":
			if n, ok := d.atLeastOne(p, v); ok {
				c.MaxInflight = n
			}
		case "outbox_high_water":
			if n, ok := d.size(p, v); ok {
				c.OutboxHighWater = n
			}
		case "outbox_max":
			if n, ok := d.size(p, v); ok {
				c.OutboxMax = n
			}
		default:
			d.unknown(p)
		}
	}
	// Compare the two only when both are known to be what the user meant.
	if len(d.errs) == nerrs && c.OutboxMax <= c.OutboxHighWater {
		// Name the key the user wrote: outbox_max if present, else outbox_high_water.
		if _, set := t["outbox_max"]; set {
			d.errorf(path.with("outbox_max"), "%s must be larger than outbox_high_water (%s)",
				formatSize(c.OutboxMax), formatSize(c.OutboxHighWater))
		} else {
			d.errorf(path.with("outbox_high_water"), "%s must be smaller than outbox_max (default %s); raise outbox_max",
				formatSize(c.OutboxHighWater), formatSize(c.OutboxMax))
		}
	}
}

// server decodes one [servers.NAME] table. ok is false when it has problems
// (already recorded).
func (d *decoder) server(path keyPath, name string, t map[string]any) (s serverConfig, ok bool) {
	nerrs := len(d.errs)
	if !validServerName(name) {
		d.errorf(path, "invalid server name: use letters, digits, '.', '_' and '-', "+
			"starting with a letter or digit, at most %d bytes", maxServerNameLen)
	}
	s = serverConfig{
		Name:            name,
		Stderr:          defaultStderr,
		StdinGrace:      defaultStdinGrace,
		TermGrace:       defaultTermGrace,
		StartTimeout:    defaultStartTimeout,
		MaxMessageBytes: defaultMaxMessageBytes,
		MaxJunkLines:    defaultMaxJunkLines,
		WriteQueueBytes: defaultWriteQueueBytes,

		RestartBackoff:    250 * time.Millisecond,
		RestartBackoffMax: 30 * time.Second,
		RestartWindow:     60 * time.Second,
		MaxRestarts:       5,
		WriteStallTimeout: 60 * time.Second,
		PingFailures:      3,

		MaxSessions:          1024,
		ServerRequests:       "latest",
		ServerRequestTimeout: 60 * time.Second,
		DefaultLogLevel:      "info",
	}
	if _, set := t["command"]; !set {
		d.errorf(path.with("command"), "missing: every server needs a command")
	}
	for key, v := range t {
		p := path.with(key)
		switch key {
		case "command":
			if c, ok := d.str(p, v); ok {
				s.Command = d.command(p, c)
			}
		case "args":
			if list, ok := d.strs(p, v); ok {
				if slices.ContainsFunc(list, hasNUL) {
					d.errorf(p, "arguments must not contain NUL bytes")
				}
				s.Args = list
			}
		case "env":
			s.Env = d.env(p, v)
		case "inherit_env":
			list, ok := d.strs(p, v)
			if !ok {
				break
			}
			for _, n := range list {
				if !validEnvName(n) {
					d.errorf(p, "invalid variable name %q: it must be non-empty, without '=' or NUL", n)
				}
			}
			s.InheritEnv = list
		case "cwd":
			if c, ok := d.str(p, v); ok {
				s.Cwd = d.cwd(p, c)
			}
		case "stderr":
			if mode, ok := d.str(p, v); ok {
				s.Stderr, s.StderrPath = d.stderr(p, mode)
			}
		case "stdin_grace":
			if dur, ok := d.duration(p, v); ok {
				s.StdinGrace = dur
			}
		case "term_grace":
			if dur, ok := d.duration(p, v); ok {
				s.TermGrace = dur
			}
		case "start_timeout":
			if dur, ok := d.longerThanZero(p, v); ok {
				s.StartTimeout = dur
			}
		case "max_message_bytes":
			if n, ok := d.size(p, v); ok {
				if n < minMaxMessageBytes || n > maxMaxMessageBytes {
					d.errorf(p, "%s is out of range: want %s to %s",
						formatSize(n), formatSize(minMaxMessageBytes), formatSize(maxMaxMessageBytes))
					break
				}
				s.MaxMessageBytes = n
			}
		case "max_junk_lines":
			if n, ok := d.integer(p, v); ok {
				if n < 0 {
					d.errorf(p, "must not be negative (got %d)", n)
					break
				}
				s.MaxJunkLines = n
			}
		case "write_queue_bytes":
			if n, ok := d.size(p, v); ok {
				s.WriteQueueBytes = n
			}
		case "restart_backoff":
			if dur, ok := d.longerThanZero(p, v); ok {
				s.RestartBackoff = dur
			}
		case "restart_backoff_max":
			if dur, ok := d.longerThanZero(p, v); ok {
				s.RestartBackoffMax = dur
			}
		case "restart_window":
			if dur, ok := d.longerThanZero(p, v); ok {
				s.RestartWindow = dur
			}
		case "write_stall_timeout":
			if dur, ok := d.duration(p, v); ok {
				s.WriteStallTimeout = dur
			}
		case "ping_interval":
			if dur, ok := d.duration(p, v); ok {
				s.PingInterval = dur
			}
		case "request_timeout":
			if dur, ok := d.duration(p, v); ok {
				s.RequestTimeout = dur
			}
		case "idle_timeout":
			if dur, ok := d.duration(p, v); ok {
				s.IdleTimeout = dur
			}
		case "max_restarts":
			if n, ok := d.integer(p, v); ok {
				if n < 0 {
					d.errorf(p, "must not be negative (got %d)", n)
					break
				}
				s.MaxRestarts = n
			}
		case "ping_failures":
			if n, ok := d.atLeastOne(p, v); ok {
				s.PingFailures = n
			}
		case "max_sessions":
			if n, ok := d.atLeastOne(p, v); ok {
				s.MaxSessions = n
			}
		case "server_requests":
			if mode, ok := d.str(p, v); ok {
				if mode != "latest" && mode != "serialize" {
					d.errorf(p, "invalid value %q: want \"latest\" or \"serialize\"", mode)
					break
				}
				s.ServerRequests = mode
			}
		case "server_request_timeout":
			if dur, ok := d.longerThanZero(p, v); ok {
				s.ServerRequestTimeout = dur
			}
		case "roots":
			if str, isStr := v.(string); isStr {
				if str != "sessions" {
					d.errorf(p, "invalid value %q: want \"sessions\" or an array of root URIs", str)
					break
				}
				s.RootsFromSessions = true
				break
			}
			list, ok := d.strs(p, v)
			if !ok {
				break
			}
			for _, r := range list {
				if !strings.HasPrefix(r, "file://") {
					d.errorf(p, "invalid root %q: roots are file:// URIs", r)
				}
			}
			if list == nil {
				list = []string{}
			}
			s.Roots = list
		case "default_log_level":
			if lvl, ok := d.str(p, v); ok {
				switch lvl {
				case "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency":
					s.DefaultLogLevel = lvl
				default:
					d.errorf(p, "invalid level %q: want debug, info, notice, warning, error, critical, alert or emergency", lvl)
				}
			}
		case "share":
			if mode, ok := d.str(p, v); ok {
				switch mode {
				case "shared":
				case "isolated":
					s.Isolated = true
				default:
					d.errorf(p, "invalid value %q: want \"shared\" or \"isolated\"", mode)
				}
			}
		case "start":
			if mode, ok := d.str(p, v); ok {
				switch mode {
				case "eager":
				case "lazy":
					s.Lazy = true
				default:
					d.errorf(p, "invalid value %q: want \"eager\" or \"lazy\"", mode)
				}
			}
		default:
			d.unknown(p)
		}
	}
	if len(d.errs) == nerrs && s.RestartBackoffMax < s.RestartBackoff {
		d.errorf(path.with("restart_backoff_max"), "%s is shorter than restart_backoff (%s)", s.RestartBackoffMax, s.RestartBackoff)
	}
	if len(d.errs) == nerrs && s.RestartBackoffMax < s.RestartBackoff {
		d.errorf(path.with("restart_backoff_max"), "%s is shorter than restart_backoff (%s)", s.RestartBackoffMax, s.RestartBackoff)
	}
	// Compare the two only when both are known to be what the user meant.
	if len(d.errs) == nerrs && int64(s.WriteQueueBytes) < 2*int64(s.MaxMessageBytes) {
		// Name the key the user wrote: write_queue_bytes if present, else max_message_bytes.
		if _, set := t["write_queue_bytes"]; set {
			d.errorf(path.with("write_queue_bytes"), "%s must be at least twice max_message_bytes (%s)",
				formatSize(s.WriteQueueBytes), formatSize(s.MaxMessageBytes))
		} else {
			d.errorf(path.with("max_message_bytes"), "%s needs write_queue_bytes of at least twice that (default %s); set write_queue_bytes",
				formatSize(s.MaxMessageBytes), formatSize(s.WriteQueueBytes))
		}
	}
	return s, len(d.errs) == nerrs
}

// validServerName reports whether name matches [A-Za-z0-9][A-Za-z0-9._-]*
// and is at most maxServerNameLen bytes: it becomes a socket file name and a
// URL path segment.
func validServerName(name string) bool {
	if name == "" || len(name) > maxServerNameLen {
		return false
	}
	for i, r := range name {
		alnum := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '.' && r != '_' && r != '-') {
			return false
		}
	}
	return true
}

// validEnvName reports whether n can be an environment variable's name.
func validEnvName(n string) bool {
	return n != "" && !strings.ContainsAny(n, "=\x00")
}

// hasNUL reports whether s holds a NUL byte, which exec cannot pass on.
func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

// command checks a server's command. One with a slash is a path, resolved
// against the config's folder; one without is kept for a PATH lookup at each
// start.
func (d *decoder) command(p keyPath, c string) string {
	switch {
	case strings.TrimSpace(c) == "":
		d.errorf(p, "must not be empty")
	case hasNUL(c):
		d.errorf(p, "must not contain NUL bytes")
	case strings.Contains(c, "/"):
		return d.resolve(c)
	case strings.ContainsFunc(c, isSpace):
		d.errorf(p, "%q: command must be a single executable; put arguments in args", c)
	}
	return c
}

// isSpace reports whether r is ASCII white space.
func isSpace(r rune) bool { return strings.ContainsRune(" \t\n\r\v\f", r) }

// env decodes a server's env table: variable names to string values.
func (d *decoder) env(p keyPath, v any) map[string]string {
	t, ok := d.table(p, v)
	if !ok {
		return nil
	}
	env := make(map[string]string, len(t))
	for name, v := range t {
		vp := p.with(name)
		if !validEnvName(name) {
			d.errorf(vp, "invalid variable name: it must be non-empty, without '=' or NUL")
			continue
		}
		s, ok := v.(string)
		if !ok {
			d.errorf(vp, "must be a string (got %s)", tomlType(v))
			continue
		}
		if hasNUL(s) {
			d.errorf(vp, "must not contain NUL bytes")
			continue
		}
		env[name] = s
	}
	return env
}

// cwd checks a server's working folder: absolute and existing. Relative
// paths are refused rather than resolved, so the folder is never a guess.
func (d *decoder) cwd(p keyPath, c string) string {
	if c == "" {
		return ""
	}
	if !filepath.IsAbs(c) {
		d.errorf(p, "%q must be an absolute path", c)
		return ""
	}
	c = filepath.Clean(c)
	fi, err := os.Stat(c)
	switch {
	case errors.Is(err, os.ErrNotExist):
		d.errorf(p, "%q does not exist", c)
	case err != nil:
		d.errorf(p, "%v", err)
	case !fi.IsDir():
		d.errorf(p, "%q is not a directory", c)
	}
	return c
}

// stderr decodes where a server's stderr goes: a mode, and for "file:PATH"
// the absolute file.
func (d *decoder) stderr(p keyPath, v string) (mode, path string) {
	switch {
	case v == "log" || v == "inherit" || v == "discard":
		return v, ""
	case strings.HasPrefix(v, "file:"):
		f := strings.TrimPrefix(v, "file:")
		if f == "" {
			d.errorf(p, `"file:" needs a path, as in "file:/var/log/mcp.log"`)
			return defaultStderr, ""
		}
		return "file", d.resolve(f)
	}
	d.errorf(p, `invalid value %q: want "log", "inherit", "discard" or "file:PATH"`, v)
	return defaultStderr, ""
}

// resolve makes a path from the file absolute, relative to the config's folder.
func (d *decoder) resolve(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(d.dir, path)
}

// The typed accessors below check the TOML type of v and record an error
// naming the key when it is wrong; ok reports whether the value is usable.

// table accepts a table (a [header] table, a dotted-key table or an inline one).
func (d *decoder) table(p keyPath, v any) (map[string]any, bool) {
	t, ok := v.(map[string]any)
	if !ok {
		d.errorf(p, "must be a table (got %s)", tomlType(v))
	}
	return t, ok
}

// boolean accepts true or false.
func (d *decoder) boolean(p keyPath, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		d.errorf(p, "must be true or false (got %s)", tomlType(v))
	}
	return b, ok
}

// str accepts a string.
func (d *decoder) str(p keyPath, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		d.errorf(p, "must be a string (got %s)", tomlType(v))
	}
	return s, ok
}

// strs accepts an array of strings.
func (d *decoder) strs(p keyPath, v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok {
		d.errorf(p, "must be an array of strings (got %s)", tomlType(v))
		return nil, false
	}
	list := make([]string, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			d.errorf(p, "must be an array of strings (element %d is %s)", i, tomlType(e))
			return nil, false
		}
		list[i] = s
	}
	return list, true
}

// integer accepts a TOML integer that fits in an int.
func (d *decoder) integer(p keyPath, v any) (int, bool) {
	n, ok := v.(int64)
	if !ok {
		d.errorf(p, "must be an integer (got %s)", tomlType(v))
		return 0, false
	}
	if n < math.MinInt || n > math.MaxInt {
		d.errorf(p, "%d is too large", n)
		return 0, false
	}
	return int(n), true
}

// atLeastOne accepts an integer of 1 or more.
func (d *decoder) atLeastOne(p keyPath, v any) (int, bool) {
	n, ok := d.integer(p, v)
	if ok && n < 1 {
		d.errorf(p, "must be at least 1 (got %d)", n)
		return 0, false
	}
	return n, ok
}

// longerThanZero accepts a duration above zero.
func (d *decoder) longerThanZero(p keyPath, v any) (time.Duration, bool) {
	dur, ok := d.duration(p, v)
	if ok && dur == 0 {
		d.errorf(p, "must be longer than zero")
		return 0, false
	}
	return dur, ok
}

// duration accepts a string in time.ParseDuration's syntax, not negative.
func (d *decoder) duration(p keyPath, v any) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		d.errorf(p, `must be a duration string such as "2s" or "250ms" (got %s)`, tomlType(v))
		return 0, false
	}
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(p, "invalid duration %q", s)
		return 0, false
	case dur < 0:
		d.errorf(p, "negative duration %q", s)
		return 0, false
	}
	return dur, true
}

// size accepts a byte count: an integer, or a string of digits with an
// optional unit (see parseSize).
func (d *decoder) size(p keyPath, v any) (int, bool) {
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
		if n < 0 {
			d.errorf(p, "negative size %d", n)
			return 0, false
		}
	case string:
		var err error
		if n, err = parseSize(v); err != nil {
			d.errorf(p, "%v", err)
			return 0, false
		}
	default:
		d.errorf(p, `must be a size: an integer number of bytes or a string such as "16MiB" (got %s)`, tomlType(v))
		return 0, false
	}
	if n > math.MaxInt {
		d.errorf(p, "size %d is too large", n)
		return 0, false
	}
	return int(n), true
}

// sizeUnit returns the multiplier of a unit parseSize knows, ignoring case.
func sizeUnit(unit string) (int64, bool) {
	switch strings.ToLower(unit) {
	case "", "b":
		return 1, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "kib":
		return 1 << 10, true
	case "mib":
		return 1 << 20, true
	case "gib":
		return 1 << 30, true
	}
	return 0, false
}

// parseSize parses a whole number of bytes followed by an optional unit,
// without spaces: "1048576", "100B", "512KiB", "16MiB", "1GiB", or the decimal
// "2MB" (KB, MB and GB are powers of 1000). Units ignore case. Signs,
// fractions and values beyond int64 are refused.
func parseSize(s string) (int64, error) {
	digits := s[:len(s)-len(strings.TrimLeft(s, "0123456789"))]
	unit := s[len(digits):]
	mult, ok := sizeUnit(unit)
	if digits == "" || !ok {
		return 0, fmt.Errorf(`invalid size %q: want a whole number of bytes with an optional unit: B, KB, MB, GB, KiB, MiB, GiB (as in "16MiB")`, s)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// formatSize writes n with the largest binary unit that divides it exactly.
func formatSize(n int) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// tomlType names the TOML type of a value decoded by go-toml, for messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "a date or time"
	}
	return fmt.Sprintf("%T", v)
}
