package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
)

// maxImportSize bounds the file import reads: Claude Code's ~/.claude.json
// keeps per-project state besides its servers and can grow to megabytes.
const maxImportSize = 64 << 20

func newImportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Print the [servers.NAME] tables for the MCP servers of an editor's config file",
		Long: `Reads the MCP servers configured for an editor and prints them as mcpmux
[servers.NAME] tables, to append to mux.toml. It understands:

  Claude Desktop   claude_desktop_config.json          {"mcpServers": {...}}
  Claude Code      .mcp.json, ~/.claude.json            {"mcpServers": {...}, "projects": {PATH: {"mcpServers": {...}}}}
  Cursor           ~/.cursor/mcp.json, .cursor/mcp.json {"mcpServers": {...}}
  VS Code          .vscode/mcp.json, the user mcp.json  {"servers": {...}}
                   settings.json                        {"mcp": {"servers": {...}}}

Comments and trailing commas are allowed. Servers reached by URL are listed
as not imported: mcpmux runs stdio servers. Values that refer to variables
(${input:...}, ${env:...}) are kept as they are, with a "# check:" comment:
mcpmux does not expand them.

The entries of a project's config (a project's .mcp.json, .vscode/mcp.json or
.cursor/mcp.json, and the "projects" of ~/.claude.json) get share = "project":
the editor ran them in the project's folder, so mcpmux runs one per project,
in its root; ${workspaceFolder} becomes {project}, that root.

  mcpmux import ~/.cursor/mcp.json >> ~/.config/mcpmux/mux.toml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readImportFile(args[0])
			if err != nil {
				return err
			}
			name := args[0]
			if abs, err := filepath.Abs(name); err == nil {
				name = abs
			}
			imp, err := importServers(data, name)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), imp.TOML())
			return err
		},
	}
}

// readImportFile reads an editor's config file, up to maxImportSize.
func readImportFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxImportSize+1))
	if err != nil {
		return nil, fmt.Errorf("import: read %s: %w", path, err)
	}
	if len(data) > maxImportSize {
		return nil, fmt.Errorf("import: %s is larger than %s", path, config.FormatSize(maxImportSize))
	}
	return data, nil
}

// importResult is what import found in one file.
type importResult struct {
	File    string           // the file, as named in the output
	Kinds   []string         // the shapes recognised, such as "VS Code mcp.json"
	Servers []importedServer // in output order
	Skipped []string         // why entries were not imported, one line each
}

// importedServer is one stdio server, ready to be written as TOML.
type importedServer struct {
	Name    string              // a valid mcpmux server name, unique in the result
	Command string              // never empty
	Args    []string            // as in the file
	Env     map[string]string   // as in the file
	Cwd     string              // absolute and existing; "" when none is written
	Notes   []string            // comments above the table
	Checks  map[string][]string // "check:" comments above a line: "command", "args", "cwd" or "env.NAME"
	CwdNote string              // a cwd line written commented out, when the cwd cannot be used as it is
	Share   string              // "project" for an entry of a project's config; "" otherwise
}

// importSource is one object of servers: name -> entry.
type importSource struct {
	origin  string // "" or "project PATH" (Claude Code's ~/.claude.json)
	project string // what makes its entries a project's, when they are: they get share = "project"
	entries map[string]json.RawMessage
}

// projectFile says what makes file a project's config (its servers run in
// the project's folder, which the file does not name), or "" for a user's
// or an application's config.
func projectFile(file string) string {
	dir, base := filepath.Dir(file), filepath.Base(file)
	home, _ := os.UserHomeDir()
	switch {
	case base == ".mcp.json":
		return "a project's .mcp.json"
	case filepath.Base(dir) == ".vscode" && (base == "mcp.json" || base == "settings.json"):
		return "a VS Code workspace's " + base
	case filepath.Base(dir) == ".cursor" && base == "mcp.json" && filepath.Dir(dir) != home:
		return "a Cursor project's mcp.json"
	}
	return ""
}

// workspaceRefs are the editors' names for the project's folder, which
// share = "project" calls {project}.
var workspaceRefs = []string{"${workspaceFolder}", "${workspaceRoot}", "${PWD}", "${CLAUDE_PROJECT_DIR}"}

const importExpected = `expected a JSON object with "mcpServers" (Claude Desktop, Claude Code, Cursor), ` +
	`"projects" holding "mcpServers" (Claude Code's ~/.claude.json), "servers" (VS Code's mcp.json) ` +
	`or "mcp": {"servers": ...} (VS Code's settings.json)`

// importServers finds the MCP servers in an editor's config file (JSON,
// with comments and trailing commas allowed) and converts those that run
// over stdio. file names the file in errors and in the output.
func importServers(data []byte, file string) (*importResult, error) {
	clean := stripJSONC(data)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(clean, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := offsetLineCol(clean, int(se.Offset)-1) // Offset is just past the bad byte
			return nil, fmt.Errorf("import %s:%d:%d: not valid JSON: %v; %s", file, line, col, se, importExpected)
		}
		return nil, fmt.Errorf("import %s: not an MCP server list: %s", file, importExpected)
	}
	res := &importResult{File: file}
	sources, err := importSources(top, res)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", file, err)
	}
	if len(res.Kinds) == 0 {
		return nil, fmt.Errorf("import %s: no MCP servers found: %s", file, importExpected)
	}
	if scope := projectFile(file); scope != "" {
		for i := range sources {
			if sources[i].project == "" {
				sources[i].project = scope
			}
		}
	}
	taken := map[string]*importedServer{}
	for _, src := range sources {
		for _, orig := range slices.Sorted(maps.Keys(src.entries)) {
			res.add(src, orig, taken)
		}
	}
	return res, nil
}

// importSources finds the objects of servers in an editor's config, and
// notes their kinds in res.
func importSources(top map[string]json.RawMessage, res *importResult) ([]importSource, error) {
	var sources []importSource
	plain := func(what, kind string, raw json.RawMessage) error {
		entries, err := serverObject(raw)
		if err != nil {
			return fmt.Errorf("%s %w", what, err)
		}
		res.Kinds = append(res.Kinds, kind)
		sources = append(sources, importSource{entries: entries})
		return nil
	}
	if raw, ok := top["mcpServers"]; ok {
		if err := plain(`"mcpServers"`, "mcpServers", raw); err != nil {
			return nil, err
		}
	}
	projects, err := projectSources(top["projects"])
	if err != nil {
		return nil, err
	}
	if len(projects) > 0 {
		res.Kinds = append(res.Kinds, "Claude Code projects")
		sources = append(sources, projects...)
	}
	if raw, ok := top["servers"]; ok {
		if err := plain(`"servers"`, "VS Code servers", raw); err != nil {
			return nil, err
		}
	}
	var mcp map[string]json.RawMessage
	if raw, ok := top["mcp"]; ok && json.Unmarshal(raw, &mcp) == nil && mcp["servers"] != nil {
		if err := plain(`"mcp"."servers"`, "VS Code settings mcp.servers", mcp["servers"]); err != nil {
			return nil, err
		}
	}
	return sources, nil
}

// projectSources are the servers of Claude Code's ~/.claude.json: its
// per-project state, some of it servers. A "projects" of another shape
// belongs to some other tool: it is ignored.
func projectSources(raw json.RawMessage) ([]importSource, error) {
	var projects map[string]map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &projects) != nil {
		return nil, nil
	}
	var sources []importSource
	for _, p := range slices.Sorted(maps.Keys(projects)) {
		if _, ok := projects[p]["mcpServers"]; !ok {
			continue
		}
		entries, err := serverObject(projects[p]["mcpServers"])
		if err != nil {
			return nil, fmt.Errorf("\"projects\".%q.\"mcpServers\" %w", p, err)
		}
		sources = append(sources, importSource{origin: "project " + p, project: "that project's entry", entries: entries})
	}
	return sources, nil
}

// add converts the entry orig of src into res: a server under a name no
// other has taken, or a line saying why it is skipped.
func (res *importResult) add(src importSource, orig string, taken map[string]*importedServer) {
	label := strconv.Quote(orig)
	if src.origin != "" {
		label += " (" + src.origin + ")"
	}
	raw := src.entries[orig]
	if src.project != "" {
		for _, ref := range workspaceRefs {
			raw = bytes.ReplaceAll(raw, []byte(ref), []byte("{project}"))
		}
	}
	s, skip := convertEntry(orig, raw)
	if skip != "" {
		res.Skipped = append(res.Skipped, label+" "+skip)
		return
	}
	if src.origin != "" {
		s.Notes = append(s.Notes, "from Claude Code's "+src.origin)
	}
	if src.project != "" {
		s.shareByProject(src.project)
	}
	name := sanitizeServerName(orig)
	if prev := taken[name]; prev != nil && sameServer(prev, &s) {
		res.Skipped = append(res.Skipped, label+" is the same as [servers."+tomlKey(name)+"]")
		return
	}
	if taken[name] != nil && src.origin != "" {
		name = sanitizeServerName(orig + "-" + filepath.Base(strings.TrimPrefix(src.origin, "project ")))
	}
	name = uniqueServerName(name, taken)
	if name != orig {
		s.Notes = append(s.Notes, fmt.Sprintf("renamed: %q is %s; clients connect with: mcpmux connect %s",
			orig, renameReason(orig), name))
	}
	s.Name = name
	// The table must load on its own; what does not is reported instead.
	if _, err := config.Parse([]byte(s.TOML()), "", ""); err != nil {
		res.Skipped = append(res.Skipped, label+" does not convert: "+strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	res.Servers = append(res.Servers, s)
	taken[name] = &s
}

// serverObject decodes an object of servers, name -> entry.
func serverObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, errors.New("must be an object of servers, name -> {\"command\": ..., \"args\": [...]}")
	}
	return entries, nil
}

// importKeys are the entry keys import understands; others are listed as ignored.
var importKeys = []string{"args", "command", "cwd", "disabled", "env", "envFile", "headers", "httpUrl", "serverUrl", "type", "url"}

// convertEntry converts one server entry. skip, when not "", ends a
// sentence saying why the entry is not imported ("is a URL server ...").
func convertEntry(name string, raw json.RawMessage) (s importedServer, skip string) {
	var e map[string]json.RawMessage
	if err := json.Unmarshal(raw, &e); err != nil || e == nil {
		return s, "is not an object"
	}
	command, skip := stdioCommand(e)
	if skip != "" {
		return s, skip
	}
	s.Checks = map[string][]string{}
	if typ, _ := entryText(e, "type"); typ != "" && !strings.EqualFold(typ, "stdio") {
		s.Notes = append(s.Notes, fmt.Sprintf("check: its type was %q; imported as a stdio server", typ))
	}
	s.convertCommand(command)
	if skip := s.convertArgs(e["args"]); skip != "" {
		return s, skip
	}
	if name, ok := s.connectsToMcpmux(); ok {
		return s, fmt.Sprintf("already runs `mcpmux connect %s`: it is a client of mcpmux, and as a server of mcpmux it would connect to itself", name)
	}
	if skip := s.convertEnv(e["env"]); skip != "" {
		return s, skip
	}
	if cwd, ok := entryText(e, "cwd"); ok && cwd != "" {
		s.convertCwd(cwd)
	}
	s.noteTheRest(e)
	return s, ""
}

// entryText is the text of an entry's key ("" and true when absent); ok
// is false for a value that is not a string, number or boolean.
func entryText(e map[string]json.RawMessage, key string) (string, bool) {
	v, ok := e[key]
	if !ok {
		return "", true
	}
	return jsonText(v)
}

// stdioCommand is the command of an entry that runs over stdio; skip says
// why one does not.
func stdioCommand(e map[string]json.RawMessage) (command, skip string) {
	typ, _ := entryText(e, "type")
	var url string
	for _, k := range []string{"url", "serverUrl", "httpUrl"} {
		if u, ok := entryText(e, k); ok && u != "" {
			url = u
			break
		}
	}
	command, ok := entryText(e, "command")
	if !ok {
		return "", "has a command that is not a string"
	}
	switch strings.ToLower(typ) {
	case "http", "sse", "streamable-http", "streamablehttp", "ws", "websocket":
		if url == "" {
			return "", fmt.Sprintf("is a %s server; mcpmux serves stdio servers", typ)
		}
		return "", fmt.Sprintf("is a URL server (%s); mcpmux serves stdio servers", url)
	}
	if strings.TrimSpace(command) == "" {
		if url != "" {
			return "", fmt.Sprintf("is a URL server (%s); mcpmux serves stdio servers", url)
		}
		return "", "has no command"
	}
	return command, ""
}

// connectsToMcpmux reports whether the server is mcpmux's own bridge
// (mcpmux [flags] connect [flags] NAME), and the server it reaches.
func (s *importedServer) connectsToMcpmux() (name string, ok bool) {
	if filepath.Base(s.Command) != "mcpmux" {
		return "", false
	}
	i := slices.IndexFunc(s.Args, func(a string) bool { return !strings.HasPrefix(a, "-") })
	if i < 0 || s.Args[i] != "connect" {
		return "", false
	}
	name = "NAME"
	if last := s.Args[len(s.Args)-1]; len(s.Args) > i+1 && !strings.HasPrefix(last, "-") {
		name = last
	}
	return name, true
}

func (s *importedServer) check(key, msg string) { s.Checks[key] = append(s.Checks[key], msg) }

// convertCommand takes the command. One with spaces but no slash cannot be
// one executable: it is split, as the shell would have for the simple cases.
func (s *importedServer) convertCommand(command string) {
	if !strings.Contains(command, "/") && strings.ContainsFunc(strings.TrimSpace(command), config.IsSpace) {
		fields := strings.Fields(command)
		command, s.Args = fields[0], fields[1:]
		s.check("command", fmt.Sprintf("the command was %q: split at spaces into command and args", strings.Join(fields, " ")))
	}
	s.Command = command
	if strings.Contains(command, "/") && !filepath.IsAbs(command) && !strings.Contains(command, "${") {
		s.check("command", fmt.Sprintf("%q is relative: mcpmux resolves it against mux.toml's folder; make it absolute", command))
	}
	if ref := varRef(command); ref != "" {
		s.check("command", refCheck(ref, ""))
	}
}

// convertArgs takes the args after those split from the command.
func (s *importedServer) convertArgs(v json.RawMessage) (skip string) {
	if v == nil || string(v) == "null" {
		return ""
	}
	var list []json.RawMessage
	if json.Unmarshal(v, &list) != nil {
		return "has args that are not an array"
	}
	for i, a := range list {
		t, ok := jsonText(a)
		if !ok {
			return fmt.Sprintf("has args[%d] that is not a string", i)
		}
		if ref := varRef(t); ref != "" {
			s.check("args", fmt.Sprintf("args[%d]: %s", len(s.Args), refCheck(ref, "")))
		}
		s.Args = append(s.Args, t)
	}
	return ""
}

// convertEnv takes the env variables that can be set; the others are noted.
func (s *importedServer) convertEnv(v json.RawMessage) (skip string) {
	if v == nil || string(v) == "null" {
		return ""
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(v, &env) != nil {
		return "has an env that is not an object"
	}
	for k, raw := range env {
		t, ok := jsonText(raw)
		switch {
		case !config.ValidEnvName(k):
			s.Notes = append(s.Notes, fmt.Sprintf("check: env %q left out: not a valid variable name", k))
			continue
		case !ok:
			s.Notes = append(s.Notes, fmt.Sprintf("check: env %s left out: its value is not a string", k))
			continue
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		s.Env[k] = t
		if ref := varRef(t); ref != "" {
			s.check("env."+k, refCheck(ref, k))
		}
	}
	return ""
}

// convertCwd takes a working folder that exists here; another is left
// commented out, with what to fix.
func (s *importedServer) convertCwd(cwd string) {
	s.CwdNote = "cwd = " + tomlString(cwd)
	fi, err := os.Stat(cwd)
	switch {
	case strings.Contains(cwd, "${"):
		s.check("cwd", refCheck(varRef(cwd), "")+"; then uncomment the line")
	case !filepath.IsAbs(cwd):
		s.check("cwd", "not an absolute path: make it one, then uncomment the line")
	case err != nil || !fi.IsDir():
		s.check("cwd", "no such folder here: fix it, then uncomment the line")
	default:
		s.Cwd, s.CwdNote = filepath.Clean(cwd), ""
	}
}

// shareByProject makes an entry of a project's config one process per
// project: the editor started it in the project's folder, which the entry
// does not name, and behind one daemon it would run in the daemon's.
func (s *importedServer) shareByProject(scope string) {
	s.Share = "project"
	s.Notes = append(s.Notes, fmt.Sprintf(`share = "project" (%s): one process per project, run in its root, `+
		`the nearest folder with .git at or above where mcpmux connect starts; {project} names it in args and env`, scope))
	cwd := s.Cwd
	if cwd == "" {
		cwd = strings.TrimPrefix(s.CwdNote, "cwd = ")
	}
	s.Cwd, s.CwdNote = "", ""
	delete(s.Checks, "cwd")
	if cwd != "" && cwd != `"{project}"` && cwd != "{project}" {
		s.Notes = append(s.Notes, fmt.Sprintf(`check: its cwd %s is left out: share = "project" runs it in the project's root; `+
			`name another folder in its args, with {project}, if it needs one`, cwd))
	}
}

// noteTheRest notes what the entry says that mcpmux does not take.
func (s *importedServer) noteTheRest(e map[string]json.RawMessage) {
	if f, ok := entryText(e, "envFile"); ok && f != "" {
		s.Notes = append(s.Notes, fmt.Sprintf("check: it read variables from envFile %q: mcpmux has no envFile; copy them into env", f))
	}
	if d, _ := entryText(e, "disabled"); d == "true" {
		s.Notes = append(s.Notes, "check: it is disabled in the editor; leave this table out if you do not want it")
	}
	var ignored []string
	for k := range e {
		if !slices.Contains(importKeys, k) {
			ignored = append(ignored, k)
		}
	}
	if len(ignored) > 0 {
		slices.Sort(ignored)
		s.Notes = append(s.Notes, "ignored, as mcpmux has no equivalent: "+strings.Join(ignored, ", "))
	}
}

// jsonText returns a JSON string's value, or the text of a number or a
// boolean (an "env": {"PORT": 3000} means "3000"); ok is false for other types.
func jsonText(raw json.RawMessage) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// varRefPattern matches a variable reference: ${input:id}, ${env:NAME},
// ${workspaceFolder}, ${NAME:-default}.
var varRefPattern = regexp.MustCompile(`\$\{[^}]*\}`)

// varRef returns the first variable reference in s, or "".
func varRef(s string) string {
	if m := varRefPattern.FindString(s); m != "" {
		return m
	}
	if strings.Contains(s, "${") {
		return "${"
	}
	return ""
}

// refCheck explains what to do about a variable reference; envKey is the
// variable's name when the reference is an env value.
func refCheck(ref, envKey string) string {
	msg := fmt.Sprintf("%s is kept as written: mcpmux does not expand ${...}; replace it with the value", ref)
	inner := strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")
	inner = strings.TrimPrefix(inner, "env:")
	if i := strings.Index(inner, ":-"); i >= 0 {
		inner = inner[:i]
	}
	switch {
	case envKey == "" || inner != envKey:
	case slices.Contains([]string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}, envKey):
		msg += fmt.Sprintf(", or drop it: servers always get the daemon's %s", envKey)
	default:
		msg += fmt.Sprintf(`, or drop it and add %q to inherit_env to pass on the daemon's own`, envKey)
	}
	return msg
}

// sameServer reports whether two servers run the same thing.
func sameServer(a, b *importedServer) bool {
	return a.Command == b.Command && slices.Equal(a.Args, b.Args) && a.Cwd == b.Cwd && a.CwdNote == b.CwdNote &&
		len(a.Env) == len(b.Env) && func() bool {
		for k, v := range a.Env {
			if w, ok := b.Env[k]; !ok || w != v {
				return false
			}
		}
		return true
	}()
}

// sanitizeServerName makes name a valid mcpmux server name: every other
// character becomes '-', runs of '-' become one, and the result starts with
// a letter or digit and fits in config.MaxServerNameLen bytes. Valid names are
// returned as they are.
func sanitizeServerName(name string) string {
	if config.ValidServerName(name) {
		return name
	}
	var b strings.Builder
	for _, r := range name {
		ok := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		switch {
		case ok:
			b.WriteRune(r)
		case !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	s := strings.TrimRight(strings.TrimLeft(b.String(), "._-"), "-") // "@acme/github (work)" -> "acme-github-work"
	if len(s) > config.MaxServerNameLen {
		s = strings.TrimRight(s[:config.MaxServerNameLen], "-")
	}
	if s == "" {
		return "server"
	}
	return s
}

// uniqueServerName returns name, or name-2, name-3... if taken holds it.
func uniqueServerName(name string, taken map[string]*importedServer) string {
	if taken[name] == nil {
		return name
	}
	for i := 2; ; i++ {
		suffix := "-" + strconv.Itoa(i)
		base := name
		if len(base)+len(suffix) > config.MaxServerNameLen {
			base = base[:config.MaxServerNameLen-len(suffix)]
		}
		if n := base + suffix; taken[n] == nil {
			return n
		}
	}
}

// renameReason says why a server was renamed.
func renameReason(orig string) string {
	if config.ValidServerName(orig) {
		return "taken"
	}
	return "not a valid mcpmux server name (letters, digits, '.', '_', '-', starting with a letter or digit)"
}

// TOML writes the result as a TOML document of [servers.NAME] tables, with
// what was not imported in comments at the end.
func (r *importResult) TOML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# mcpmux import %s (%s): %d %s.\n", tomlComment(r.File), strings.Join(r.Kinds, ", "),
		len(r.Servers), plural(len(r.Servers), "server", "servers"))
	b.WriteString("# Append to mux.toml; read the \"check:\" comments first.\n")
	for i := range r.Servers {
		b.WriteString("\n")
		b.WriteString(r.Servers[i].TOML())
	}
	if len(r.Skipped) > 0 {
		b.WriteString("\n")
		for _, s := range r.Skipped {
			b.WriteString("# not imported: " + tomlComment(s) + "\n")
		}
	}
	return b.String()
}

// TOML writes the server as one [servers.NAME] table.
func (s *importedServer) TOML() string {
	var b strings.Builder
	checks := func(key string) {
		for _, c := range s.Checks[key] {
			b.WriteString("# check: " + tomlComment(c) + "\n")
		}
	}
	for _, n := range s.Notes {
		b.WriteString("# " + tomlComment(n) + "\n")
	}
	table := "servers." + tomlKey(s.Name)
	b.WriteString("[" + table + "]\n")
	checks("command")
	b.WriteString("command = " + tomlString(s.Command) + "\n")
	if len(s.Args) > 0 {
		checks("args")
		quoted := make([]string, len(s.Args))
		for i, a := range s.Args {
			quoted[i] = tomlString(a)
		}
		b.WriteString("args = [" + strings.Join(quoted, ", ") + "]\n")
	}
	if s.Share != "" {
		b.WriteString("share = " + tomlString(s.Share) + "\n")
	}
	checks("cwd")
	switch {
	case s.Cwd != "":
		b.WriteString("cwd = " + tomlString(s.Cwd) + "\n")
	case s.CwdNote != "":
		b.WriteString("# " + tomlComment(s.CwdNote) + "\n")
	}
	if len(s.Env) > 0 {
		b.WriteString("\n[" + table + ".env]\n")
		keys := make([]string, 0, len(s.Env))
		for k := range s.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			checks("env." + k)
			b.WriteString(tomlKey(k) + " = " + tomlString(s.Env[k]) + "\n")
		}
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tomlKey writes k as a TOML key: bare when it can be, else quoted.
func tomlKey(k string) string {
	if config.IsBareKey(k) {
		return k
	}
	return tomlString(k)
}

// tomlString writes s as a TOML basic string. s must be valid UTF-8 (JSON
// strings are); invalid bytes become U+FFFD.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r) // utf8.RuneError for invalid bytes, written as U+FFFD
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlComment makes s safe inside a one-line TOML comment, where control
// characters other than tab are not allowed.
func tomlComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
}

// stripJSONC turns JSON with comments (// and /* */) and trailing commas,
// as VS Code writes it, into JSON. Comments and the commas become spaces,
// so offsets and lines stay where they were; strings are never touched.
func stripJSONC(data []byte) []byte {
	out := bytes.Clone(data)
	if bytes.HasPrefix(out, []byte("\xef\xbb\xbf")) { // a byte order mark
		copy(out, "   ")
	}
	outsideStrings(out, func(i int) int { return blankComment(out, i) })
	// Now that comments are blanks, a comma followed only by blanks and a
	// closing bracket is a trailing one.
	outsideStrings(out, func(i int) int {
		if out[i] == ',' {
			j := i + 1
			for j < len(out) && strings.IndexByte(" \t\r\n", out[j]) >= 0 {
				j++
			}
			if j < len(out) && (out[j] == '}' || out[j] == ']') {
				out[i] = ' '
			}
		}
		return i
	})
	return out
}

// outsideStrings calls at with the index of each byte of out that is not
// inside a JSON string; at returns the index of the last byte it handled.
func outsideStrings(out []byte, at func(i int) int) {
	inString := false
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case inString && c == '\\':
			i++ // the escaped character, which may be a quote
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		default:
			i = at(i)
		}
	}
}

// blankComment blanks the comment starting at out[i], if one does,
// keeping its line breaks, and returns the index of its last byte.
func blankComment(out []byte, i int) int {
	if out[i] != '/' || i+1 >= len(out) {
		return i
	}
	switch out[i+1] {
	case '/':
		for ; i < len(out) && out[i] != '\n' && out[i] != '\r'; i++ {
			out[i] = ' '
		}
	case '*':
		out[i], out[i+1] = ' ', ' '
		for i += 2; i < len(out); i++ {
			if out[i] == '*' && i+1 < len(out) && out[i+1] == '/' {
				out[i], out[i+1] = ' ', ' '
				return i + 1
			}
			if out[i] != '\n' && out[i] != '\r' {
				out[i] = ' '
			}
		}
	}
	return i
}

// offsetLineCol converts the offset of a byte in data to its 1-based line
// and column (in bytes).
func offsetLineCol(data []byte, offset int) (line, col int) {
	offset = min(max(offset, 0), len(data))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, offset - bytes.LastIndexByte(before, '\n')
}
