package editors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What doctor says of the editors' files (read only, in the same shapes
// Import reads): the servers in them that are started as mcpmux connect
// NAME, and what would keep those from working.

// Level is how much a Finding needs attention.
type Level int

const (
	OK   Level = iota
	Note       // worth knowing; nothing to do
	Warn       // needs attention
)

// Finding is one line of doctor's report.
type Finding struct {
	Level Level
	Text  string
}

// Checkup is what Check knows of the machine and of the config doctor
// checks.
type Checkup struct {
	Getenv func(string) string
	GOOS   string
	Cwd    string // the folder doctor runs in: its project files are read
	Config string // the config file doctor checks, absolute
	// DefaultConfig is the file an entry's mcpmux connect loads when the
	// entry gives neither --config nor MCPMUX_CONFIG; "" when there is none.
	DefaultConfig string
	Servers       []string            // the config's servers; nil when it does not load
	Endpoints     []string            // the config's endpoints, reached as servers are
	Tilde         func(string) string // writes a path for the report
}

// checkup is one run of Check.
type checkup struct {
	Checkup
	findings []Finding
}

func (c *checkup) add(l Level, format string, args ...any) {
	c.findings = append(c.findings, Finding{l, fmt.Sprintf(format, args...)})
}

// editorEntry is one stdio server of an editor's file.
type editorEntry struct {
	label   string // its name, with the project it belongs to if any
	command string
	args    []string
	env     map[string]string
}

// editorEntries reads the stdio servers of an editor's file; servers
// reached by URL are left out. None, and no error, for a file of the
// editor that holds no servers (a settings.json without "mcp").
func editorEntries(data []byte, file string) ([]editorEntry, error) {
	top, _, err := decodeFile(data, file)
	var fe *formatError
	switch {
	case errors.As(err, &fe):
		return nil, errors.New("not valid " + fe.Format)
	case err != nil:
		return nil, errors.New("not valid JSON")
	}
	sources, err := importSources(top, &Result{})
	if err != nil {
		return nil, err
	}
	var out []editorEntry
	for _, src := range sources {
		for _, name := range slices.Sorted(maps.Keys(src.entries)) {
			e, skip := readEntry(src.entries[name], src.rules)
			if skip != "" {
				continue
			}
			command, skip := stdioCommand(e)
			if skip != "" {
				continue
			}
			entry := editorEntry{label: name, command: command}
			if src.origin != "" {
				entry.label += " (" + src.origin + ")"
			}
			json.Unmarshal(e["args"], &entry.args) // not a list of strings: none
			json.Unmarshal(e["env"], &entry.env)
			out = append(out, entry)
		}
	}
	return out, nil
}

// connectEntry is what an entry that runs `mcpmux connect` asks for.
type connectEntry struct {
	name   string // the server; "" when none is given
	config string // --config, else MCPMUX_CONFIG in the entry's env; "" the default
}

// parseConnect reads an entry's command line as mcpmux reads it; ok is
// false for an entry that does not run `mcpmux connect`.
func parseConnect(e editorEntry) (c connectEntry, ok bool) {
	if filepath.Base(e.command) != "mcpmux" || len(e.args) == 0 || e.args[0] != "connect" {
		return c, false
	}
	for i := 1; i < len(e.args); i++ {
		switch a := e.args[i]; {
		case a == "--config" || a == "--drain":
			if a == "--config" && i+1 < len(e.args) {
				c.config = e.args[i+1]
			}
			i++
		case strings.HasPrefix(a, "--config="):
			c.config = strings.TrimPrefix(a, "--config=")
		case strings.HasPrefix(a, "-"):
		case c.name == "":
			c.name = a
		}
	}
	if c.config == "" {
		c.config = e.env["MCPMUX_CONFIG"]
	}
	return c, true
}

// Check reports, for each editor file there is, the servers it
// reaches through mcpmux and what would keep them from working.
func Check(in Checkup) []Finding {
	d := &checkup{Checkup: in}
	seen := 0
	for _, f := range Files(d.Getenv, d.GOOS, d.Cwd) {
		data, err := ReadFile(f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var entries []editorEntry
		if err == nil {
			entries, err = editorEntries(data, f.Path)
		}
		if err != nil {
			d.add(Note, "%s %s: not read: %v", f.Client.Name, d.Tilde(f.Path), err)
			continue
		}
		if len(entries) > 0 {
			seen++
			d.checkEditorFile(f, entries)
		}
	}
	if seen == 0 {
		d.add(Note, "editors: no MCP servers in the files of %s (in their usual places, and in this folder)", orList(Clients, func(c *Client) string { return c.Name }))
	}
	return d.findings
}

// checkEditorFile reports one editor file's servers.
func (d *checkup) checkEditorFile(f File, entries []editorEntry) {
	where := f.Client.Name + " " + d.Tilde(f.Path)
	var through, direct []string
	commands := map[string]bool{}
	for _, e := range entries {
		c, ok := parseConnect(e)
		if !ok {
			direct = append(direct, e.label)
			continue
		}
		commands[e.command] = true
		if d.checkConnect(where, e, &c) {
			through = append(through, c.name)
		}
	}
	for _, command := range slices.Sorted(maps.Keys(commands)) {
		d.checkCommand(where, f.Client.For, command)
	}
	if len(through) > 0 {
		d.add(OK, "%s: %s through mcpmux", where, strings.Join(through, ", "))
	}
	if len(direct) > 0 {
		d.add(Note, "%s: started directly, not through mcpmux: %s (`mcpmux import %s` converts them)", where, strings.Join(direct, ", "), d.Tilde(f.Path))
	}
}

// checkConnect reports an entry that runs `mcpmux connect` with another
// config, or with a name the config does not have (none is the endpoint
// all); true when it reaches a server or endpoint of this config.
func (d *checkup) checkConnect(where string, e editorEntry, c *connectEntry) bool {
	config := c.config
	if config == "" {
		config = d.DefaultConfig
	}
	if c.name == "" {
		c.name = "all" // the endpoint of every server
	}
	switch {
	case filepath.Clean(config) != d.Config:
		d.add(Note, "%s: %q uses another config, %s", where, e.label, d.Tilde(config))
		return false
	case d.Servers != nil && !slices.Contains(d.Servers, c.name) && !slices.Contains(d.Endpoints, c.name):
		d.add(Warn, "%s: %q runs `mcpmux connect %s`, and the config has no server %s (it has: %s)", where, e.label, c.name, c.name, strings.Join(d.Servers, ", "))
		return false
	}
	return true
}

// checkCommand reports an mcpmux the editor cannot start: a path that
// is not there, or a bare name this PATH does not find.
func (d *checkup) checkCommand(where, target, command string) {
	if filepath.IsAbs(command) {
		if fi, err := os.Stat(command); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			d.add(Warn, "%s: starts %s, which is not an executable file: `mcpmux client-config NAME --for %s` prints the entry with this mcpmux", where, command, target)
		}
		return
	}
	if strings.Contains(command, "/") {
		return // relative to a folder of the editor's: nothing to check from here
	}
	if !onPath(d.Getenv("PATH"), command) {
		d.add(Warn, "%s: starts %q by name, and this PATH has none: install mcpmux on PATH, or use its absolute path (`mcpmux client-config NAME --for %s` prints it)", where, command, target)
	}
}

// onPath reports whether an executable file named name is in one of the
// folders of path.
func onPath(path, name string) bool {
	for _, dir := range filepath.SplitList(path) {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
