package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/endpoint"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
)

// maxFileSize bounds the file we are willing to read: a real config is a
// few kilobytes.
const maxFileSize = 1 << 20

// Config is a parsed and checked config file. Every field holds its final
// value: defaults are filled in and relative paths are already absolute.
type Config struct {
	Path    string // absolute path of the file; "" when parsed from bytes with no name
	Daemon  Daemon
	Listen  Listen
	Servers []daemon.Server // the [servers.NAME] tables, sorted by name
	// Endpoints are the [endpoints.NAME] tables, and the endpoint "all"
	// (every server) unless the file defines it or names a server so;
	// sorted by name.
	Endpoints []endpoint.Config
}

// Endpoint is the endpoint named name; nil when there is none.
func (c *Config) Endpoint(name string) *endpoint.Config {
	for i := range c.Endpoints {
		if c.Endpoints[i].Name == name {
			return &c.Endpoints[i]
		}
	}
	return nil
}

// Daemon is the [daemon] table: how the daemon logs, whether `connect`
// starts one, and the daemon's own limits (the fields of daemon.Config of
// the same names, and socket.WebConfig's MaxHTTPSessions).
type Daemon struct {
	LogLevel  slog.Level    // log_level: "debug", "info" (default), "warn" or "error"
	LogFormat string        // log_format: "text" (default) or "json"
	Autostart bool          // autostart: `connect` starts a daemon when none answers; default true
	IdleExit  time.Duration // idle_exit: stop after this long without sessions; default 0 = never

	FirstByteTimeout time.Duration // first_byte_timeout: a socket connection silent this long after connecting is closed; default daemon.DefaultFirstByteTimeout; 0 in the file = daemon.NoLimit
	LineTimeout      time.Duration // line_timeout: a session that began a message and did not finish it within this long is closed; default daemon.DefaultLineTimeout; 0 in the file = daemon.NoLimit
	MaxQueuedBytes   int           // max_queued_bytes: answers queued for all sessions together before the largest holder is evicted; default daemon.DefaultMaxQueuedBytes; 0 in the file = daemon.NoLimit
	MaxHTTPSessions  int           // max_http_sessions: Streamable HTTP sessions at once, all servers together (the idlest is evicted); default streamable.DefaultMaxSessions
}

// Listen is the [listen] table: where clients reach the daemon, and the
// limits of every client session.
type Listen struct {
	SocketDir         string // socket_dir: absolute; default DefaultSocketDir's
	SocketDirNote     string // why the default socket folder is not the usual one; "" when it is, or socket_dir is set
	MaxStreamsPerConn int    // max_streams_per_conn: yamux streams per Unix connection; default socket.DefaultMaxStreams

	// Session holds max_inflight, outbox_high_water, outbox_max and
	// drain_timeout, the limits of each session of every server (defaults:
	// the session package's).
	Session session.Config
	// Web is the web listener: http (Addr; "" = none), http_token (Token;
	// "" = generated and kept by the daemon), http_origins,
	// http_allow_remote, http_session_idle, http_max_connections,
	// http_max_streams, http_max_listens, metrics (Metrics: GET /metrics
	// behind the token), and
	// max_inflight for the POSTs of a Streamable HTTP session. What is
	// not a key of [listen] is left for the daemon to set.
	Web socket.WebConfig
}

// Server is the [servers.NAME] table named name; nil when there is none.
func (c *Config) Server(name string) *daemon.Server {
	for i := range c.Servers {
		if c.Servers[i].Name() == name {
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

// MissingAdvice is what to do when there is no config file, as Load's
// error and doctor say it.
const MissingAdvice = "write one (the README's quick start has one), or pass --config FILE"

// MissingError is Load's error for a config file that does not exist.
type MissingError struct {
	Path string
	Err  error // the open's, which errors.Is finds fs.ErrNotExist in
}

func (e *MissingError) Error() string {
	return "config " + e.Path + " does not exist: " + MissingAdvice
}

func (e *MissingError) Unwrap() error { return e.Err }

// Load reads the config file at path, then parses and checks it like
// Parse, resolving relative paths against the file's folder. Every error
// names the file.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &MissingError{Path: path, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	// Read one byte past the limit, so that Parse sees an oversized file.
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load config: read %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return Parse(data, path, filepath.Dir(abs))
}

// Parse parses and checks a config file held in data. name is the file's
// name, used in error messages and to set Config.Path (as a file in dir,
// unless it is absolute); dir is the folder relative paths in the file
// are resolved against ("" means the working folder). All problems found
// are returned together, one per line of the error, in line order.
//
// The bytes are read twice: go-toml decodes them into generic values (and
// so enforces TOML itself: syntax, duplicate keys and tables,
// redefinitions), and go-toml's unstable parser walks them to learn where
// every key is. The generic values are then decoded key by key, as the
// tables of tables.go say, into the libraries' own configurations.
func Parse(data []byte, name, dir string) (*Config, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: config file is larger than %s", cmp.Or(name, "config"), FormatSize(maxFileSize))
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
	cfg := d.document(doc)
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
