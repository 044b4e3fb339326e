package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpmux/mcpmux/internal/statefile"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/upstream"
)

// memoryDir is what mcpmux remembers of a server started a given way
// (command, arguments, folder), across runs of the daemon: a folder of the
// state folder, servers/KEY, KEY a digest of how it starts. It is a plain
// value, so that a reload sees two of the same server as equal.
type memoryDir struct {
	dir string
	log *slog.Logger // where a refused file is said
}

// sendsRequestsFile says the server was seen sending requests of its own,
// and which kinds of request caused them: one JSON string a line. An older
// mcpmux left it empty, saying only that the server asks.
const sendsRequestsFile = "sends-requests"

// maxAsks bounds the sends-requests file: a line per kind of request.
const maxAsks = 64 << 10

func (m memoryDir) Asks() (kinds []string, all bool) {
	b, err := statefile.ReadFile(filepath.Join(m.dir, sendsRequestsFile), maxAsks)
	if err != nil {
		m.refused(err)
		return nil, false
	}
	for line := range strings.Lines(string(b)) {
		var k string
		if json.Unmarshal([]byte(line), &k) == nil && k != "" && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, len(kinds) == 0
}

// RememberAsks adds a line; a daemon that dies halfway leaves at worst a
// line that does not decode, which Asks skips. The file is appended to as
// statefile opens it: never through a link, only when it is ours.
func (m memoryDir) RememberAsks(kind string) error {
	line, err := json.Marshal(kind)
	if err != nil {
		return err
	}
	if err := m.prepare(); err != nil {
		return err
	}
	f, err := statefile.OpenAppend(filepath.Join(m.dir, sendsRequestsFile))
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// prepare makes the server's folder (and the servers folder above it) by
// statefile's rules: a folder of another user or a symlink is refused.
func (m memoryDir) prepare() error {
	if _, err := statefile.PrepareDir(filepath.Dir(m.dir)); err != nil {
		return err
	}
	_, err := statefile.PrepareDir(m.dir)
	return err
}

// refused logs a file statefile refused: it is then treated as missing.
func (m memoryDir) refused(err error) {
	switch {
	case m.log == nil:
	case errors.Is(err, statefile.ErrUnsafe):
		m.log.Warn("refused a file of what mcpmux remembers of a server, not a private file of this user; doing without it", "error", err)
	case errors.Is(err, statefile.ErrTooLarge):
		m.log.Warn("refused a file of what mcpmux remembers of a server, too large; doing without it", "error", err)
	}
}

// descriptionFile keeps the server's last initialize or discover result.
const descriptionFile = "description.json"

// maxDescription bounds a description file: a result is one message of
// the server, which the daemon reads no larger than this either.
const maxDescription = upstream.DefaultMaxMessageBytes + 1<<10

type description struct {
	Era    string          `json:"era"`
	Result json.RawMessage `json:"result"`
}

func (m memoryDir) Description() (era string, result []byte) {
	b, err := statefile.ReadFile(filepath.Join(m.dir, descriptionFile), maxDescription)
	if err != nil {
		m.refused(err)
		return "", nil
	}
	var d description
	if json.Unmarshal(b, &d) != nil || len(d.Result) == 0 {
		return "", nil // the hub would only refuse it; a new one replaces it
	}
	return d.Era, d.Result
}

// RememberDescription writes the file whole or not at all: a daemon that
// dies halfway leaves the old one.
func (m memoryDir) RememberDescription(era string, result []byte) error {
	b, err := json.Marshal(description{Era: era, Result: result})
	if err != nil {
		return err
	}
	if err := m.prepare(); err != nil {
		return err
	}
	return statefile.WriteFile(filepath.Join(m.dir, descriptionFile), b)
}

// listFile keeps the server's last answer to a list method, beside its
// description: tools/list in tools-list.json, and so on.
func listFile(method string) string {
	return strings.ReplaceAll(method, "/", "-") + ".json"
}

// List is the server's last answer to method, as RememberList kept it.
// A list is one message of the server, bounded as a description is.
func (m memoryDir) List(method string) (era string, result []byte) {
	b, err := statefile.ReadFile(filepath.Join(m.dir, listFile(method)), maxDescription)
	if err != nil {
		m.refused(err)
		return "", nil
	}
	var d description
	if json.Unmarshal(b, &d) != nil || len(d.Result) == 0 {
		return "", nil
	}
	return d.Era, d.Result
}

// RememberList writes the file whole or not at all, as
// RememberDescription does.
func (m memoryDir) RememberList(method, era string, result []byte) error {
	b, err := json.Marshal(description{Era: era, Result: result})
	if err != nil {
		return err
	}
	if len(b) > maxDescription {
		return statefile.ErrTooLarge
	}
	if err := m.prepare(); err != nil {
		return err
	}
	return statefile.WriteFile(filepath.Join(m.dir, listFile(method)), b)
}

// startKey names how a server starts: the same command, arguments and
// folder, the same era it is opened in, the same env set in the config and
// the same upstream_capabilities give the same key. A server may describe
// itself by any of them (server-everything lists some tools only to a
// client that declares what they ask for), so a server started otherwise
// is never answered from another's lists. Parts left at their defaults add
// nothing, so the keys of such servers stay what they were.
func startKey(c mux.Config) string {
	h := sha256.New()
	part := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, p := range append([]string{c.Upstream.Command, c.Upstream.Dir}, c.Upstream.Args...) {
		part(p)
	}
	if c.Protocol != "" && c.Protocol != mux.ProtocolAuto {
		part("protocol=" + c.Protocol)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Upstream.Env)) {
		part("env=" + k + "=" + c.Upstream.Env[k])
	}
	if len(c.UpstreamCapabilities) > 0 {
		part("upstream_capabilities=" + string(c.UpstreamCapabilities))
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// serverMemory is the router's memory of the server hub configures, kept
// in the state folder state; nil when there is none.
func serverMemory(state string, hub mux.Config, log *slog.Logger) mux.Memory {
	if state == "" {
		return nil
	}
	return memoryDir{dir: filepath.Join(state, "servers", startKey(hub)), log: log}
}
