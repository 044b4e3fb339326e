package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpmux/mcpmux/config"
)

// The editors' MCP config files doctor reads (read only; the same shapes
// `mcpmux import` reads), and what it says of the servers in them that are
// started as `mcpmux connect NAME`.

// editorFile is one editor config file, and the --for value of the editor.
type editorFile struct {
	editor, target, path string
}

// editorFiles are the places the editors keep their MCP servers: per user,
// and per project in the folder doctor runs in.
func editorFiles(env doctorEnv) []editorFile {
	home := env.getenv("HOME")
	// Claude Desktop and VS Code keep their user files in the platform's
	// folder for application settings.
	appData := filepath.Join(home, "Library", "Application Support")
	if env.goos != "darwin" {
		appData = filepath.Join(home, ".config")
		if x := env.getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
			appData = x
		}
	}
	var files []editorFile
	add := func(editor, target, base string, rel ...string) {
		if filepath.IsAbs(base) {
			files = append(files, editorFile{editor, target, filepath.Join(append([]string{base}, rel...)...)})
		}
	}
	add("Claude Code", "claude", home, ".claude.json")
	add("Claude Code", "claude", env.cwd, ".mcp.json")
	if filepath.IsAbs(home) {
		add("Claude Desktop", "claude-desktop", appData, "Claude", "claude_desktop_config.json")
		add("VS Code", "vscode", appData, "Code", "User", "mcp.json")
		add("VS Code", "vscode", appData, "Code", "User", "settings.json")
	}
	add("Cursor", "cursor", home, ".cursor", "mcp.json")
	add("Cursor", "cursor", env.cwd, ".cursor", "mcp.json")
	add("VS Code", "vscode", env.cwd, ".vscode", "mcp.json")
	seen := map[string]bool{} // a project folder may be the home folder
	return slices.DeleteFunc(files, func(f editorFile) bool {
		dup := seen[f.path]
		seen[f.path] = true
		return dup
	})
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
func editorEntries(data []byte) ([]editorEntry, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(stripJSONC(data), &top); err != nil {
		return nil, errors.New("not valid JSON")
	}
	sources, err := importSources(top, &importResult{})
	if err != nil {
		return nil, err
	}
	var out []editorEntry
	for _, src := range sources {
		for _, name := range slices.Sorted(maps.Keys(src.entries)) {
			var e map[string]json.RawMessage
			if json.Unmarshal(src.entries[name], &e) != nil {
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

// checkEditors reports, for each editor file there is, the servers it
// reaches through mcpmux and what would keep them from working.
func (d *doctor) checkEditors() {
	seen := 0
	for _, f := range editorFiles(d.env) {
		data, err := readImportFile(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var entries []editorEntry
		if err == nil {
			entries, err = editorEntries(data)
		}
		if err != nil {
			d.r.add(markNote, "%s %s: not read: %v", f.editor, d.tilde(f.path), err)
			continue
		}
		if len(entries) > 0 {
			seen++
			d.checkEditorFile(f, entries)
		}
	}
	if seen == 0 {
		d.r.add(markNote, "editors: no MCP servers in the files of Claude Code, Claude Desktop, Cursor or VS Code (in their usual places, and in this folder)")
	}
}

// checkEditorFile reports one editor file's servers.
func (d *doctor) checkEditorFile(f editorFile, entries []editorEntry) {
	where := f.editor + " " + d.tilde(f.path)
	var through, direct []string
	commands := map[string]bool{}
	for _, e := range entries {
		c, ok := parseConnect(e)
		if !ok {
			direct = append(direct, e.label)
			continue
		}
		commands[e.command] = true
		if d.checkConnect(where, e, c) {
			through = append(through, c.name)
		}
	}
	for _, command := range slices.Sorted(maps.Keys(commands)) {
		d.checkCommand(where, f.target, command)
	}
	if len(through) > 0 {
		d.r.add(markOK, "%s: %s through mcpmux", where, strings.Join(through, ", "))
	}
	if len(direct) > 0 {
		d.r.add(markNote, "%s: started directly, not through mcpmux: %s (`mcpmux import %s` converts them)", where, strings.Join(direct, ", "), d.tilde(f.path))
	}
}

// checkConnect reports an entry that runs `mcpmux connect` with another
// config, with no name, or with a name the config does not have; true
// when it reaches a server of this config.
func (d *doctor) checkConnect(where string, e editorEntry, c connectEntry) bool {
	file := c.config
	if file == "" {
		file, _ = config.DefaultPath(func(k string) string {
			if k == "MCPMUX_CONFIG" {
				return "" // the editor's environment is not doctor's: assume it has none
			}
			return d.env.getenv(k)
		})
	}
	switch {
	case filepath.Clean(file) != d.path:
		d.r.add(markNote, "%s: %q uses another config, %s", where, e.label, d.tilde(file))
		return false
	case c.name == "":
		d.r.add(markWarn, "%s: %q runs `mcpmux connect` without a server name", where, e.label)
		return false
	case d.cfg != nil && !slices.Contains(serverNames(d.cfg), c.name):
		d.r.add(markWarn, "%s: %q runs `mcpmux connect %s`, and the config has no server %s (it has: %s)", where, e.label, c.name, c.name, strings.Join(serverNames(d.cfg), ", "))
		return false
	}
	return true
}

// checkCommand reports an mcpmux the editor cannot start: a path that
// is not there, or a bare name this PATH does not find.
func (d *doctor) checkCommand(where, target, command string) {
	if filepath.IsAbs(command) {
		if fi, err := os.Stat(command); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			d.r.add(markWarn, "%s: starts %s, which is not an executable file: `mcpmux client-config NAME --for %s` prints the entry with this mcpmux", where, command, target)
		}
		return
	}
	if strings.Contains(command, "/") {
		return // relative to a folder of the editor's: nothing to check from here
	}
	if !onPath(d.env.getenv("PATH"), command) {
		d.r.add(markWarn, "%s: starts %q by name, and this PATH has none: install mcpmux on PATH, or use its absolute path (`mcpmux client-config NAME --for %s` prints it)", where, command, target)
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
