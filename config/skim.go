package config

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/pelletier/go-toml/v2"
)

// Outline is what Skim reads of a config file.
type Outline struct {
	// SocketDir is [listen] socket_dir, resolved as Load resolves it; ""
	// when it is not set (or not a string).
	SocketDir string
	// Servers are the [servers.NAME] tables, sorted by name; none when
	// [servers] or one of its entries is not a table.
	Servers []OutlinedServer
}

// OutlinedServer is a [servers.NAME] table as Skim reads it.
type OutlinedServer struct {
	Name    string
	Command []string // command, then args: the strings among them, as written
}

// Skim reads a config file leniently, for those who must say something
// of a file that does not load (a wrong value, a folder that is gone):
// where its daemon serves and which servers it has. It fails only when the
// file cannot be read, is larger than 1 MiB or is not TOML.
func Skim(path string) (Outline, error) {
	f, err := os.Open(path)
	if err != nil {
		return Outline{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return Outline{}, err
	}
	if len(data) > maxFileSize {
		return Outline{}, fmt.Errorf("%s: config file is larger than %s", path, FormatSize(maxFileSize))
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return Outline{}, err
	}
	var o Outline
	if dir, _ := valueAt(doc, keyPath{"listen", "socket_dir"}).(string); dir != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return Outline{}, err
		}
		o.SocketDir = (&decoder{dir: filepath.Dir(abs)}).resolve(dir)
	}
	servers, _ := doc["servers"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		t, ok := servers[name].(map[string]any)
		if !ok {
			return Outline{SocketDir: o.SocketDir}, nil
		}
		s := OutlinedServer{Name: name, Command: []string{}}
		args, _ := t["args"].([]any)
		for _, w := range append([]any{t["command"]}, args...) {
			if w, ok := w.(string); ok {
				s.Command = append(s.Command, w)
			}
		}
		o.Servers = append(o.Servers, s)
	}
	return o, nil
}
