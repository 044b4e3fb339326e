package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Parsing goes over the same bytes three times: go-toml decodes the document into
// generic values (and so enforces TOML itself: syntax, duplicate keys and
// tables, redefinitions), go-toml's unstable parser walks it to learn where
// every key is, and go-toml decodes it strictly into the schema of
// schema.go (unknown keys, wrong types). check.go then checks the
// values. Each problem is reported as "file:line: dotted.key: what"; the
// generic values only say what a wrong-typed value is.

// MaxFileSize bounds the file we are willing to read: a real config is a
// few kilobytes.
const MaxFileSize = 1 << 20

const (
	minMaxMessageBytes = 1 << 10
	maxMaxMessageBytes = 1 << 30
	MaxServerNameLen   = 64
)

// Config is a parsed and validated config file. Every field holds its final
// value: defaults are filled in and relative paths are already absolute.
type Config struct {
	Path    string // absolute path of the file; "" when parsed from bytes with no name
	Daemon  Daemon
	Listen  Listen
	Servers []Server // sorted by Name
}

// Daemon is the [daemon] table: how the daemon itself logs.
type Daemon struct {
	LogLevel  slog.Level    // log_level: "debug", "info" (default), "warn" or "error"
	LogFormat string        // log_format: "text" (default) or "json"
	Autostart bool          // autostart: `connect` starts a daemon when none answers; default true
	IdleExit  time.Duration // idle_exit: stop after this long without sessions; default 0 = never

	FirstByteTimeout time.Duration // first_byte_timeout: a socket connection silent this long after connecting is closed; default 1m; 0 = never
	LineTimeout      time.Duration // line_timeout: a session that began a message and did not finish it within this long is closed; default 1m; 0 = never
	MaxQueuedBytes   int           // max_queued_bytes: answers queued for all sessions together before the largest holder is evicted; default 1GiB; 0 = no bound
	MaxHTTPSessions  int           // max_http_sessions: Streamable HTTP sessions at once, all servers together (the idlest is evicted); default 256
}

// Listen is the [listen] table: where clients reach the daemon, and
// the flow-control limits applied to every client session.
type Listen struct {
	SocketDir         string   // socket_dir: absolute; default /run/user/UID/mcpmux when that folder is the user's, else /tmp/mcpmux-UID (else, when that one is another's, ~/.mcpmux/run)
	SocketDirNote     string   // why the default socket folder is not the usual one; "" when it is, or socket_dir is set
	HTTP              string   // http: host:port of the web listener; "" = no web listener
	HTTPToken         string   // http_token: "" = generated and kept by the daemon
	HTTPOrigins       []string // http_origins: browser Origins allowed; none by default
	MaxInflight       int      // max_inflight: requests in flight per session before it is no longer read; default 256
	OutboxHighWater   int      // outbox_high_water: bytes queued to a client before it is no longer read; default 1MiB
	OutboxMax         int      // outbox_max: bytes queued to a client before it is evicted; default 64MiB
	HTTPAllowRemote   bool     // http_allow_remote: serve the web listener beyond loopback; default false
	MaxStreamsPerConn int      // max_streams_per_conn: yamux streams per Unix connection; default 256

	DrainTimeout time.Duration // drain_timeout: how long a client that half-closed waits for its answers in flight; default 60s

	HTTPSessionIdle time.Duration // http_session_idle: a Streamable HTTP session without requests this long ends; default 24h

	HTTPMaxConnections int // http_max_connections: connections to the web listener at once; default 1024
	HTTPMaxStreams     int // http_max_streams: long-lived web streams at once (listens, GET streams, WebSockets); default three quarters of http_max_connections, and below it
	HTTPMaxListens     int // http_max_listens: listens of one client, GET streams of one HTTP session; default 16
}

// Server is one [servers.NAME] table: an MCP server run over stdio.
type Server struct {
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
	InitTimeout     time.Duration     // initialize_timeout: how long a started server may take to answer before it is killed; default 5m
	Protocol        string            // protocol: "auto" (default), "legacy" or "modern": the era the server is opened in
	UpstreamCaps    json.RawMessage   // upstream_capabilities: what mcpmux declares to the server, as written; nil = the default
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
	MaxConcurrency       int           // max_concurrency: requests in flight at the server; default 0 = no limit
	ServerRequests       string        // server_requests: "auto" (default), "latest" or "serialize"
	ServerRequestTimeout time.Duration // server_request_timeout: how long a session has to answer the server; default 60s
	Roots                []string      // roots = ["file:///...", ...]: answered by mcpmux
	RootsFromSessions    bool          // roots = "sessions": the union of the sessions' roots
	DefaultLogLevel      string        // default_log_level: the level of sessions that set none; default "info"
	Share                string        // share: "shared" (default), "isolated" (a process per session) or "project" (a process per project)
	ProjectMarkers       []string      // project_markers: what makes a folder a project's root; default [".git"]
}

// Server is the [servers.NAME] table named name; nil when there is none.
func (c *Config) Server(name string) *Server {
	for i := range c.Servers {
		if c.Servers[i].Name == name {
			return &c.Servers[i]
		}
	}
	return nil
}

// DefaultPath returns where the config is read from when no path is
// given: $MCPMUX_CONFIG, else $XDG_CONFIG_HOME/mcpmux/mux.toml, else
// $HOME/.config/mcpmux/mux.toml. As the XDG spec asks, a relative
// XDG_CONFIG_HOME is ignored. getenv is os.Getenv outside tests.
func DefaultPath(getenv func(string) string) (string, error) {
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

// Load reads the config file at path, then parses and validates it
// like Parse, resolving relative paths against the file's folder.
// Every error names the file.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	// Read one byte past the limit, so that Parse sees an oversized file.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load config: read %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return Parse(data, path, filepath.Dir(abs))
}

// Parse parses and validates a config file held in data. name is the
// file's name, used in error messages and to set config.Path (as a file in
// dir, unless it is absolute); dir is the folder relative paths in the file
// are resolved against ("" means the working folder). All problems found are
// returned together, one *fileError each, in line order.
func Parse(data []byte, name, dir string) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: config file is larger than %s", cmp.Or(name, "config"), FormatSize(MaxFileSize))
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

	d := &decoder{file: name, dir: absDir, idx: idx}
	var cfg *Config
	if f := d.decodeFile(data, doc); f != nil {
		cfg = d.document(f)
	}
	if len(d.errs) > 0 {
		slices.SortStableFunc(d.errs, func(a, b *fileError) int {
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

// fileError is one problem in a config file, located by line and key.
type fileError struct {
	File string // the name given to Parse; may be ""
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path, such as servers.memory.stdin_grace; may be ""
	Msg  string
}

// Error formats the problem as "file:line: key: message", leaving out the
// parts that are unknown.
func (e *fileError) Error() string {
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
// into a fileError carrying its line and, when there is one, the key's
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
	return &fileError{File: file, Line: line, Key: key.String(), Msg: msg}
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
		if !IsBareKey(k) {
			parts[i] = strconv.Quote(k)
		}
	}
	return strings.Join(parts, ".")
}

// IsBareKey reports whether k may be written as an unquoted TOML key.
func IsBareKey(k string) bool {
	return k != "" && !strings.ContainsFunc(k, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	})
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
	// keys maps the offset of every part of a key to the path up to it.
	keys map[int]keyPath
	// newlines are the offsets of the document's newlines.
	newlines []int
}

// at returns the path of the key part at a 1-based line and column.
func (idx *keyIndex) at(line, col int) (keyPath, bool) {
	start := 0
	if line > 1 && line-2 < len(idx.newlines) {
		start = idx.newlines[line-2] + 1
	}
	p, ok := idx.keys[start+col-1]
	return p, ok
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

	idx := &keyIndex{lines: make(map[string]int), tables: make(map[int]keyPath), keys: make(map[int]keyPath), newlines: newlines}
	lines := idx.lines
	// addKey records each part of a (dotted) key under base and returns the full path.
	addKey := func(base keyPath, it unstable.Iterator) keyPath {
		p := slices.Clip(base)
		for it.Next() {
			k := it.Node()
			p = append(p, string(k.Data))
			idx.keys[int(k.Raw.Offset)] = slices.Clone(p)
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

// decoder checks a decoded file, collecting one fileError per problem
// rather than stopping at the first.
type decoder struct {
	file string // for messages
	dir  string // absolute; relative paths resolve against it
	idx  *keyIndex
	errs []*fileError
}

// line returns the line of path, or of its nearest ancestor that has one.
func (d *decoder) line(path keyPath) int {
	for p := path; len(p) > 0; p = p[:len(p)-1] {
		if n, ok := d.idx.lines[p.id()]; ok {
			return n
		}
	}
	return 0
}

// errorf records a problem with the key at path.
func (d *decoder) errorf(path keyPath, format string, args ...any) {
	d.errs = append(d.errs, &fileError{
		File: d.file,
		Line: d.line(path),
		Key:  path.String(),
		Msg:  fmt.Sprintf(format, args...),
	})
}

// ValidServerName reports whether name matches [A-Za-z0-9][A-Za-z0-9._-]*
// and is at most MaxServerNameLen bytes: it becomes a socket file name and a
// URL path segment.
func ValidServerName(name string) bool {
	if name == "" || len(name) > MaxServerNameLen {
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

// ValidEnvName reports whether n can be an environment variable's name.
func ValidEnvName(n string) bool {
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
	case strings.ContainsFunc(c, IsSpace):
		d.errorf(p, "%q: command must be a single executable; put arguments in args", c)
	}
	return c
}

// IsSpace reports whether r is ASCII white space.
func IsSpace(r rune) bool { return strings.ContainsRune(" \t\n\r\v\f", r) }

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
			return "log", ""
		}
		return "file", d.resolve(f)
	}
	d.errorf(p, `invalid value %q: want "log", "inherit", "discard" or "file:PATH"`, v)
	return "log", ""
}

// resolve makes a path from the file absolute, relative to the config's folder.
func (d *decoder) resolve(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(d.dir, path)
}

// The accessors below check a value and record an error naming the key
// when it is wrong; ok reports whether the value is usable.

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

// duration accepts a string in time.ParseDuration's syntax, not negative.
func (d *decoder) duration(p keyPath, s string) (time.Duration, bool) {
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

// FormatSize writes n with the largest binary unit that divides it exactly.
func FormatSize(n int) string {
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
