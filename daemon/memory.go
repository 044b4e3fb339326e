package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpmux/mcpmux/mux"
)

// memoryDir is what mcpmux remembers of a server started a given way
// (command, arguments, folder), across runs of the daemon: a folder of the
// state folder, servers/KEY, KEY a digest of how it starts. It is a plain
// value, so that a reload sees two of the same server as equal.
type memoryDir struct {
	dir string
}

// sendsRequestsFile says the server was seen sending requests of its own,
// and which kinds of request caused them: one JSON string a line. An older
// mcpmux left it empty, saying only that the server asks.
const sendsRequestsFile = "sends-requests"

func (m memoryDir) Asks() (kinds []string, all bool) {
	b, err := os.ReadFile(filepath.Join(m.dir, sendsRequestsFile))
	if err != nil {
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
// line that does not decode, which Asks skips.
func (m memoryDir) RememberAsks(kind string) error {
	line, err := json.Marshal(kind)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(m.dir, sendsRequestsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// descriptionFile keeps the server's last initialize or discover result.
const descriptionFile = "description.json"

type description struct {
	Era    string          `json:"era"`
	Result json.RawMessage `json:"result"`
}

func (m memoryDir) Description() (era string, result []byte) {
	b, err := os.ReadFile(filepath.Join(m.dir, descriptionFile))
	if err != nil {
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
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(m.dir, descriptionFile+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(m.dir, descriptionFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// startKey names how a server starts: the same command, arguments and
// folder, and the same era it is opened in, give the same key. (A server
// of both eras describes itself per era; "auto", the default, adds nothing,
// so the keys of such servers stay what they were.)
func startKey(c mux.Config) string {
	h := sha256.New()
	for _, part := range append([]string{c.Upstream.Command, c.Upstream.Dir}, c.Upstream.Args...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	if c.Protocol != "" && c.Protocol != mux.ProtocolAuto {
		h.Write([]byte("protocol=" + c.Protocol))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// serverMemory is the router's memory of the server hub configures, kept
// in the state folder state; nil when there is none.
func serverMemory(state string, hub mux.Config) mux.Memory {
	if state == "" {
		return nil
	}
	return memoryDir{dir: filepath.Join(state, "servers", startKey(hub))}
}
