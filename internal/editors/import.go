package editors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux"
)

// maxImportSize bounds the file import reads: Claude Code's ~/.claude.json
// keeps per-project state besides its servers and can grow to megabytes.
const maxImportSize = 64 << 20

// ReadFile reads an editor's config file, up to maxImportSize.
func ReadFile(path string) ([]byte, error) {
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

// Result is what Import found in one file.
type Result struct {
	File    string   // the file, as named in the output
	Kinds   []string // the shapes recognised, such as "VS Code mcp.json"
	Servers []Server // in output order
	Skipped []string // why entries were not imported, one line each
	reuse   bool     // an entry that runs the same as a server taken under another name is that server (adopt)
}

// Server is one stdio server of an editor's file, ready to be written as
// a [servers.NAME] table.
type Server struct {
	Name    string              // a valid mcpmux server name, unique in the result
	Command string              // never empty
	Args    []string            // as in the file
	Env     map[string]string   // as in the file
	Cwd     string              // absolute and existing; "" when none is written
	Notes   []string            // comments above the table
	Checks  map[string][]string // "check:" comments above a line: "command", "args", "cwd" or "env.NAME"
	CwdNote string              // a cwd line written commented out, when the cwd cannot be used as it is
	Share   string              // "project" for an entry of a project's config; "" otherwise

	InheritEnv     []string // variables the editor passed on from its own environment
	StartTimeout   string   // start_timeout, from the editor's timeout for a server to start; "" for none
	RequestTimeout string   // request_timeout, from the editor's timeout for a request; "" for none
	MaxConcurrency int      // max_concurrency, for a server known to be unsafe to share; 0 for none
}

// importSource is one object of servers: name -> entry.
type importSource struct {
	client  string // the editor whose file names the project, with origin
	origin  string // "" or "project PATH" (Claude Code's ~/.claude.json)
	project string // what makes its entries a project's, when they are: they get share = "project"
	entries map[string]json.RawMessage
	rules   entryRules
	path    []string // the members leading to entries from the top
}

// entryRules are what is particular to the entries of one source.
type entryRules struct {
	normalize func(e map[string]json.RawMessage) (skip string) // the shape's Normalize
	timeouts  []Timeout                                        // the editor's Timeouts
}

// workspaceRefs are the editors' names for the project's folder, which
// share = "project" calls {project}.
var workspaceRefs = []string{"${workspaceFolder}", "${workspaceRoot}", "${PWD}", "${CLAUDE_PROJECT_DIR}"}

const importExpected = `expected a JSON object with "mcpServers" (Claude Desktop, Claude Code, Cursor), ` +
	`"projects" holding "mcpServers" (Claude Code's ~/.claude.json), "servers" (VS Code's mcp.json) ` +
	`or "mcp": {"servers": ...} (VS Code's settings.json); also "mcp" holding entries of "type" "local" or "remote" (opencode.json), ` +
	`"context_servers" (Zed's settings.json), or, in a .toml file, [mcp_servers.NAME] tables (Codex's config.toml)`

// Import finds the MCP servers in an editor's config file (JSON, with
// comments and trailing commas allowed) and converts those that run over
// stdio, each into a [servers.NAME] table that loads. file names the file
// in errors and in the output.
func Import(data []byte, file string) (*Result, error) {
	top, expected, err := decodeFile(data, file)
	if err != nil {
		return nil, fmt.Errorf("import %s%w", file, err)
	}
	res := &Result{File: file}
	sources, err := importSources(top, res)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", file, err)
	}
	if len(res.Kinds) == 0 {
		return nil, fmt.Errorf("import %s: no MCP servers found: %s", file, expected)
	}
	if c := fileClient(file); c != nil {
		for i := range sources {
			sources[i].rules.timeouts = c.Timeouts
		}
	}
	if scope := projectFile(file); scope != "" {
		for i := range sources {
			if sources[i].project == "" {
				sources[i].project = scope
			}
		}
	}
	taken := map[string]*Server{}
	for _, src := range sources {
		for _, orig := range slices.Sorted(maps.Keys(src.entries)) {
			res.add(src, orig, taken)
		}
	}
	return res, nil
}

// formatError is an editor's file that is not valid in the editor's own
// format (Client.Decode).
type formatError struct {
	Line, Col int    // where, 1-based
	Format    string // "TOML"
	Msg       string
	Expected  string // what import looks for in such a file
}

func (e *formatError) Error() string {
	return fmt.Sprintf(":%d:%d: not valid %s: %s; expected %s", e.Line, e.Col, e.Format, e.Msg, e.Expected)
}

// decodeFile reads an editor's file as its name says it is written: in
// an editor's own format (Client.Ext), else as JSON with comments and
// trailing commas. It returns the file's top object and what import looks
// for in it; an error reads after the file's name.
func decodeFile(data []byte, file string) (top map[string]json.RawMessage, expected string, err error) {
	for _, c := range Clients {
		if c.Decode != nil && strings.HasSuffix(file, c.Ext) {
			top, err := c.Decode(data)
			var fe *formatError
			if errors.As(err, &fe) {
				fe.Expected = c.Expected
			}
			return top, "expected " + c.Expected, err
		}
	}
	clean := stripJSONC(data)
	if err := json.Unmarshal(clean, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := offsetLineCol(clean, int(se.Offset)-1) // Offset is just past the bad byte
			return nil, "", fmt.Errorf(":%d:%d: not valid JSON: %v; %s", line, col, se, importExpected)
		}
		return nil, "", fmt.Errorf(": not an MCP server list: %s", importExpected)
	}
	return top, importExpected, nil
}

// importSources finds the objects of servers in an editor's config, in
// the shapes of Clients, and notes their kinds in res. Shapes that check
// what they read come first; a shape several editors share is read once.
func importSources(top map[string]json.RawMessage, res *Result) ([]importSource, error) {
	var sources []importSource
	var seen [][]string
	for _, checked := range []bool{true, false} {
		for _, c := range Clients {
			for _, sh := range c.Shapes {
				if (sh.Accept != nil) != checked || slices.ContainsFunc(seen, func(p []string) bool { return slices.Equal(p, sh.Path) }) {
					continue
				}
				found, ok, err := sh.sources(c, top)
				if err != nil {
					return nil, err
				}
				if !ok {
					continue
				}
				seen = append(seen, sh.Path)
				if len(found) > 0 {
					res.Kinds = append(res.Kinds, sh.Kind)
					sources = append(sources, found...)
				}
			}
		}
	}
	return sources, nil
}

// sources are the objects of servers of shape sh in the file whose top
// object is top. A member on the way that is not an object belongs to
// some other tool: the shape is not there. ok is false when the shape's
// Accept refuses the object it found, which is left to other shapes.
func (sh Shape) sources(c *Client, top map[string]json.RawMessage) (found []importSource, ok bool, err error) {
	quoted := make([]string, len(sh.Path))
	for i, k := range sh.Path {
		quoted[i] = strconv.Quote(k)
	}
	what := strings.Join(quoted, ".")
	raw, there := top[sh.Path[0]]
	for _, k := range sh.Path[1:] {
		var obj map[string]json.RawMessage
		if !there || json.Unmarshal(raw, &obj) != nil {
			return nil, sh.Accept == nil, nil
		}
		raw, there = obj[k]
	}
	rules := entryRules{normalize: sh.Normalize, timeouts: c.Timeouts}
	switch {
	case !there:
		return nil, sh.Accept == nil, nil
	case sh.Each != "":
		found, err := sh.projectSources(c, what, raw, rules)
		return found, true, err
	}
	entries, err := serverObject(raw)
	switch {
	case sh.Accept != nil && (err != nil || !sh.Accept(entries)):
		return nil, false, nil
	case err != nil:
		return nil, true, fmt.Errorf("%s %w", what, err)
	}
	return []importSource{{entries: entries, rules: rules, path: sh.Path}}, true, nil
}

// projectSources are the servers of an object of projects (Claude Code's
// ~/.claude.json keeps its per-project state there, some of it servers).
// One of another shape belongs to some other tool: it is ignored.
func (sh Shape) projectSources(c *Client, what string, raw json.RawMessage, rules entryRules) ([]importSource, error) {
	var projects map[string]map[string]json.RawMessage
	if json.Unmarshal(raw, &projects) != nil {
		return nil, nil
	}
	var sources []importSource
	for _, p := range slices.Sorted(maps.Keys(projects)) {
		if _, ok := projects[p][sh.Each]; !ok {
			continue
		}
		entries, err := serverObject(projects[p][sh.Each])
		if err != nil {
			return nil, fmt.Errorf("%s.%q.%q %w", what, p, sh.Each, err)
		}
		sources = append(sources, importSource{client: c.Name, origin: "project " + p, project: "that project's entry", entries: entries, rules: rules,
			path: slices.Concat(sh.Path, []string{p, sh.Each})})
	}
	return sources, nil
}

// add converts the entry orig of src into res: a server under a name no
// other has taken, or a line saying why it is skipped.
//
// It returns the name of the server the entry runs as: the new one, one
// taken before that runs the same thing, or "" when it is skipped. With
// res.reuse, an entry that runs the same as any server taken before is
// that server, whatever its name.
func (res *Result) add(src importSource, orig string, taken map[string]*Server) string {
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
	s, skip := convertEntry(raw, src.rules)
	if skip != "" {
		res.Skipped = append(res.Skipped, label+" "+skip)
		return ""
	}
	if src.origin != "" {
		s.Notes = append(s.Notes, "from "+src.client+"'s "+src.origin)
	}
	if src.project != "" {
		s.shareByProject(src.project)
	}
	name := sanitizeServerName(orig)
	if res.reuse {
		for _, n := range slices.Sorted(maps.Keys(taken)) {
			if sameServer(taken[n], &s) && taken[n].Share == s.Share {
				return n
			}
		}
	}
	if prev := taken[name]; prev != nil && sameServer(prev, &s) {
		if !res.reuse {
			res.Skipped = append(res.Skipped, label+" is the same as [servers."+tomlKey(name)+"]")
		}
		return name
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
		return ""
	}
	res.Servers = append(res.Servers, s)
	taken[name] = &s
	return name
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
var importKeys = []string{"args", "command", "cwd", "disabled", "enabled", "env", "envFile", "env_vars", "headers", "httpUrl", "serverUrl", "type", "url"}

// toolFilters are the editors' keys that show a server's tools, or hide
// some: import says what they did, as mcpmux shows every tool.
var toolFilters = map[string]string{
	"includeTools":   "only these of its tools were offered",
	"enabled_tools":  "only these of its tools were offered",
	"excludeTools":   "these of its tools were hidden",
	"disabled_tools": "these of its tools were hidden",
	"disabledTools":  "these of its tools were hidden",
}

// readEntry decodes one server entry, in the shape most editors share.
func readEntry(raw json.RawMessage, rules entryRules) (e map[string]json.RawMessage, skip string) {
	if err := json.Unmarshal(raw, &e); err != nil || e == nil {
		return nil, "is not an object"
	}
	if rules.normalize != nil {
		if skip := rules.normalize(e); skip != "" {
			return nil, skip
		}
	}
	return e, ""
}

// convertEntry converts one server entry. skip, when not "", ends a
// sentence saying why the entry is not imported ("is a URL server ...").
func convertEntry(raw json.RawMessage, rules entryRules) (s Server, skip string) {
	e, skip := readEntry(raw, rules)
	if skip != "" {
		return s, skip
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
	s.convertInheritEnv(e["env_vars"])
	for _, t := range rules.timeouts {
		s.convertTimeout(t, e[t.Key])
	}
	s.noteToolFilters(e)
	s.noteTheRest(e, rules.timeouts)
	return s, ""
}

// convertInheritEnv takes the names of the variables the editor passed on
// from its own environment (Codex's env_vars).
func (s *Server) convertInheritEnv(v json.RawMessage) {
	if v == nil {
		return
	}
	var names []string
	if json.Unmarshal(v, &names) != nil {
		s.Notes = append(s.Notes, "check: env_vars left out: not a list of variable names")
		return
	}
	for _, n := range names {
		if !config.ValidEnvName(n) {
			s.Notes = append(s.Notes, fmt.Sprintf("check: env_vars %q left out: not a valid variable name", n))
			continue
		}
		s.InheritEnv = append(s.InheritEnv, n)
	}
}

// convertTimeout takes one of the editor's timeouts, as the mcpmux key it
// becomes.
func (s *Server) convertTimeout(t Timeout, v json.RawMessage) {
	if v == nil {
		return
	}
	n, err := strconv.ParseFloat(string(v), 64)
	d := time.Duration(n * float64(t.Unit)).Round(time.Millisecond)
	if err != nil || d <= 0 || n*float64(t.Unit) > float64(math.MaxInt64) {
		s.Notes = append(s.Notes, fmt.Sprintf("check: %s %s left out: not a positive number", t.Key, v))
		return
	}
	if t.As == "start_timeout" && d <= mux.DefaultStartTimeout {
		return // mcpmux waits that long already
	}
	text := strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	if d%time.Second == 0 {
		text = strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	if t.As == "start_timeout" {
		s.StartTimeout = text
	} else {
		s.RequestTimeout = text
	}
}

// noteToolFilters says which tools the editor showed of the server, as
// mcpmux shows them all.
func (s *Server) noteToolFilters(e map[string]json.RawMessage) {
	for _, k := range slices.Sorted(maps.Keys(toolFilters)) {
		v, ok := e[k]
		if !ok {
			continue
		}
		var tools []string
		if json.Unmarshal(v, &tools) != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("check: %s is not a list of tool names", k))
			continue
		}
		s.Notes = append(s.Notes, fmt.Sprintf("check: %s: %s: %s; mcpmux offers every tool of the server",
			k, toolFilters[k], strings.Join(tools, ", ")))
	}
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
func (s *Server) connectsToMcpmux() (name string, ok bool) {
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

func (s *Server) check(key, msg string) { s.Checks[key] = append(s.Checks[key], msg) }

// convertCommand takes the command. One with spaces but no slash cannot be
// one executable: it is split, as the shell would have for the simple cases.
func (s *Server) convertCommand(command string) {
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
func (s *Server) convertArgs(v json.RawMessage) (skip string) {
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
func (s *Server) convertEnv(v json.RawMessage) (skip string) {
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
func (s *Server) convertCwd(cwd string) {
	s.CwdNote = "cwd = " + tomlString(cwd)
	fi, err := os.Stat(cwd)
	switch {
	case varRef(cwd) != "":
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
func (s *Server) shareByProject(scope string) {
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
func (s *Server) noteTheRest(e map[string]json.RawMessage, timeouts []Timeout) {
	if f, ok := entryText(e, "envFile"); ok && f != "" {
		s.Notes = append(s.Notes, fmt.Sprintf("check: it read variables from envFile %q: mcpmux has no envFile; copy them into env", f))
	}
	d, _ := entryText(e, "disabled")
	if enabled, _ := entryText(e, "enabled"); d == "true" || enabled == "false" {
		s.Notes = append(s.Notes, "check: it is disabled in the editor; leave this table out if you do not want it")
	}
	if ignored := unknownKeys(e, timeouts); len(ignored) > 0 {
		s.Notes = append(s.Notes, "ignored, as mcpmux has no equivalent: "+strings.Join(ignored, ", "))
	}
}

// unknownKeys are the keys of an entry import does not understand, sorted.
func unknownKeys(e map[string]json.RawMessage, timeouts []Timeout) []string {
	var ignored []string
	for k := range e {
		_, filter := toolFilters[k]
		timeout := slices.ContainsFunc(timeouts, func(t Timeout) bool { return t.Key == k })
		if !slices.Contains(importKeys, k) && !filter && !timeout {
			ignored = append(ignored, k)
		}
	}
	slices.Sort(ignored)
	return ignored
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
// ${workspaceFolder}, ${NAME:-default}; bareVarPattern those of Gemini CLI
// ($NAME) and opencode ({env:NAME}, {file:PATH}). They are compiled when
// first used, not when every mcpmux process starts.
var (
	varRefPattern  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{[^}]*\}`) })
	bareVarPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*|\{(env|file):[^}]*\}`)
	})
)

// varRef returns the first variable reference in s, or "".
func varRef(s string) string {
	if m := varRefPattern().FindString(s); m != "" {
		return m
	}
	if m := bareVarPattern().FindString(s); m != "" {
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
	inner := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(ref, "$"), "{"), "}")
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
func sameServer(a, b *Server) bool {
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
// a letter or digit and fits in config.MaxServerNameLen bytes. Valid names
// are returned as they are.
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
func uniqueServerName(name string, taken map[string]*Server) string {
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
