package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/endpoint"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/socket"
)

// ControlSocket is the name of the control endpoint inside the socket
// folder: HTTP over a Unix socket, with the owner-only checks of every
// socket. Taking it is the daemon's lock on the folder.
const ControlSocket = ".control.sock"

// The defaults of Config's limits, which their zero values stand for.
const (
	DefaultFirstByteTimeout = time.Minute
	DefaultLineTimeout      = time.Minute
	DefaultMaxQueuedBytes   = 1 << 30
)

// NoLimit, as Config.FirstByteTimeout, Config.LineTimeout or
// Config.MaxQueuedBytes, sets no limit at all.
const NoLimit = -1

// Config is what a daemon serves and how. Zero values are the defaults
// named on each field; only SocketDir is required.
type Config struct {
	// SocketDir holds the control socket and one socket per server,
	// <SocketDir>/NAME.sock. It is created 0700 when missing and refused
	// when it is not the user's alone (socket.PrepareDir).
	SocketDir string
	// Servers are served from the start, one per name.
	Servers []Server
	// Endpoints are served from the start, each at <SocketDir>/NAME.sock
	// like a server: names are shared by servers and endpoints. Their
	// members are looked up among the servers at each session's start.
	Endpoints []Endpoint
	// Web is the web listener (WebSocket and Streamable HTTP); nil means
	// none. The daemon sets its Lookup, and its Logger when nil.
	Web *socket.WebConfig
	// MaxStreamsPerConn bounds the yamux streams of one Unix connection; 0
	// means the socket package's default.
	MaxStreamsPerConn int
	// IdleExit ends Run once no server has had a session for this long; 0
	// means never.
	IdleExit time.Duration
	// FirstByteTimeout closes a connection to a server's socket that sends
	// nothing for this long after it connected; 0 means
	// DefaultFirstByteTimeout, NoLimit (or any negative) none.
	FirstByteTimeout time.Duration
	// LineTimeout closes a session of a server's socket (or of a yamux
	// stream) that began a message and did not finish it within this long;
	// 0 means DefaultLineTimeout, NoLimit (or any negative) none.
	LineTimeout time.Duration
	// MaxQueuedBytes bounds the answers queued for all sessions together,
	// whatever their server and transport: past it, the session holding
	// the most is evicted first. 0 means DefaultMaxQueuedBytes; NoLimit (or
	// any negative) no bound but each session's own. Daemon.Budget is the
	// bound, for other buffers to join.
	MaxQueuedBytes int
	// Inherited are listening sockets a service manager passed (socket
	// activation), by path. A server whose socket path is among them uses
	// that listener instead of listening anew; Run closes the ones no
	// server takes.
	Inherited map[string]*socket.Listener
	// Reload loads the configuration again for Daemon.Reload (SIGHUP and
	// `mcpmux reload`); nil means reloading is refused.
	Reload func() (Reloaded, error)
	// ConfigFile is reported by GET /status: the file this configuration
	// was read from, so that clients can tell which config a daemon serves;
	// "" when none.
	ConfigFile string
	// Version is reported by GET /status and, unless a server's own is set,
	// sent to the servers in clientInfo.
	Version string
	// Ready, when not nil, is called once on Run's goroutine as soon as
	// the control socket is taken (the socket folder is this daemon's) and
	// the daemon's Record is written, before any server's socket opens.
	Ready func()
	// StateDir is the state folder, where the daemon keeps what outlives
	// it: its Record, from the moment it holds the socket folder until Run
	// returns (only when ConfigFile is set: the record is found by the
	// file), and the memory of each server whose Hub.Memory is nil. ""
	// keeps nothing.
	StateDir string
	// Autostarted is said in the daemon's Record: mcpmux connect started it.
	Autostarted bool
	// ResidentBytes reports the daemon's resident set size for GET /status;
	// nil reports 0.
	ResidentBytes func() uint64
	// Logger receives the daemon's lifecycle records; nil discards them.
	Logger *slog.Logger
}

// Server is one server the daemon serves.
type Server struct {
	// Hub configures its router; Hub.Name is the server's name and names its
	// socket. The daemon sets Logger when nil, IDs (one counter for all
	// servers), Version when empty, Memory when nil (from StateDir, if
	// set), and Upstream.MaxMessageBytes when 0 (to
	// upstream.DefaultMaxMessageBytes: the sessions read with it too).
	Hub mux.Config
	// Share says how the server's processes are shared: mux.ShareShared
	// (also ""), mux.ShareIsolated (a process per client) or
	// mux.ShareProject (a process per project).
	Share string
}

// Name is the server's name.
func (s Server) Name() string { return s.Hub.Name }

// Endpoint is one endpoint the daemon serves.
type Endpoint struct {
	Endpoint endpoint.Config
	// Session holds the limits of each client session of the endpoint;
	// the daemon sets Budget when nil.
	Session session.Config
}

// Name is the endpoint's name.
func (e Endpoint) Name() string { return e.Endpoint.Name }

// Reloaded is what a reload of the configuration found.
type Reloaded struct {
	Servers   []Server   // the servers to serve from now on
	Endpoints []Endpoint // the endpoints to serve from now on
	// Ignored names the changes that only a restart of the daemon applies,
	// in the words of the configuration ("[listen]"); they are reported.
	Ignored []string
}

// withDefaults fills the zero limits with their defaults, and turns
// NoLimit into the zero that the parts below take for none.
func (c Config) withDefaults() Config {
	limit := func(v *time.Duration, def time.Duration) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = 0
		}
	}
	limit(&c.FirstByteTimeout, DefaultFirstByteTimeout)
	limit(&c.LineTimeout, DefaultLineTimeout)
	switch {
	case c.MaxQueuedBytes == 0:
		c.MaxQueuedBytes = DefaultMaxQueuedBytes
	case c.MaxQueuedBytes < 0:
		c.MaxQueuedBytes = 0
	}
	return c
}

// Validate reports the first problem that would stop the daemon before it
// opens anything.
func (c *Config) Validate() error {
	if c.SocketDir == "" {
		return errors.New("daemon: no socket folder")
	}
	if err := validServers(c.Servers); err != nil {
		return err
	}
	return validEndpoints(c.Endpoints, c.Servers)
}

func validEndpoints(endpoints []Endpoint, servers []Server) error {
	seen := make(map[string]bool, len(servers)+len(endpoints))
	for _, s := range servers {
		seen[s.Name()] = true
	}
	for _, e := range endpoints {
		name := e.Name()
		switch {
		case name == "" || strings.ContainsRune(name, filepath.Separator) || name == "." || name == "..":
			return fmt.Errorf("daemon: endpoint name %q cannot name a socket", name)
		case seen[name]:
			return fmt.Errorf("daemon: endpoint %q: the name is taken by a server or another endpoint", name)
		}
		seen[name] = true
	}
	return nil
}

func validServers(servers []Server) error {
	seen := make(map[string]bool, len(servers))
	for _, s := range servers {
		name := s.Name()
		switch {
		case name == "" || strings.ContainsRune(name, filepath.Separator) || name == "." || name == "..":
			return fmt.Errorf("daemon: server name %q cannot name a socket", name)
		case seen[name]:
			return fmt.Errorf("daemon: server %q configured twice", name)
		}
		seen[name] = true
	}
	return nil
}
