package editors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/endpoint"
)

// What mcpmux adopt does: the servers the editors' files on this machine
// run are imported into mux.toml, and each file's object of servers gets
// one entry, "mcpmux", that runs `mcpmux connect` (the endpoint all) when
// the file ran every configured server, else `mcpmux connect NAME` of an
// endpoint adopt adds for it, in place of the entries it adopted. Every
// file is backed up beside itself first (FILE.mcpmux-backup), so that Undo
// puts each back as it was.

// BackupSuffix ends the name of the copy adopt keeps of a file it
// rewrites; CreatedSuffix the name of the empty file that says adopt
// created the file beside it (mux.toml, when there was none).
const (
	BackupSuffix  = ".mcpmux-backup"
	CreatedSuffix = ".mcpmux-created"
)

// AdoptInput is what PlanAdoption knows of the machine and of mux.toml.
type AdoptInput struct {
	Getenv func(string) string
	GOOS   string
	Cwd    string // the project folder: its editors' files are adopted too
	Config string // mux.toml, absolute
	// ConfigText is mux.toml as it is; nil when there is none yet.
	ConfigText []byte
	// Servers are the servers mux.toml has, as import makes them: an
	// entry that runs the same is pointed at one of them.
	Servers []Server
	// Connect is the command line that reaches the endpoint all through
	// mcpmux (another endpoint's name goes after it): mcpmux's absolute
	// path, "connect", and --config when mux.toml is not in its default
	// place.
	Connect []string
}

// Adoption is what adopt would do.
type Adoption struct {
	Added      []Server   // new servers, appended to mux.toml
	Endpoints  []Endpoint // new endpoints, appended to mux.toml after them
	Rewrites   []Rewrite  // the files it rewrites, mux.toml last
	Adopted    []string   // one line per object of servers rewritten: its entries, and the one that replaces them
	NotCarried []string   // the editors' settings of adopted entries that mcpmux cannot keep, one line each
	Left       []string   // files not read and entries left as they are, one line each
}

// Endpoint is an [endpoints.NAME] table adopt adds: the servers of one
// editor's object of servers, with the tools it showed of them.
type Endpoint struct {
	Name       string
	For        string   // the file (and project) it stands for, in a comment
	Servers    []string // in the order the file had them
	AllowTools []string // over the prefixed names, SERVER__tool
	DenyTools  []string
}

// Rewrite is one file adopt rewrites.
type Rewrite struct {
	Path     string
	Old, New []byte // Old is nil for a file adopt creates
}

// knownUnsafe are servers known to lose data when sessions call them at
// once, by a piece of their command line, and why.
var knownUnsafe = []struct{ arg, why string }{
	{"@modelcontextprotocol/server-memory", "server-memory reads and rewrites its whole file on each call: calls at once from several clients lose entities"},
}

// filePlan is one editor's file adopt reads: the objects of servers in it
// whose entries it adopts.
type filePlan struct {
	f      File
	where  string // the editor and the file, for the output
	data   []byte
	groups []*group
}

// group is one object of servers of a file: the entries adopt replaces by
// one that runs mcpmux connect.
type group struct {
	path    []string // the members leading to it from the top
	origin  string   // "" or "project PATH" (Claude Code's ~/.claude.json)
	folder  string   // the project's folder when its entries are a project's; "" for a user's
	names   []string // the names of all its entries, those kept included
	members []member // the entries adopted, by name
}

// member is one adopted entry and the server it runs.
type member struct {
	orig, server string
	allow, deny  []string // the editor's tool filters, over the server's own names; nil for none
}

// PlanAdoption reads the editors' files (where doctor looks) and works out
// the adoption; it writes nothing.
func PlanAdoption(in AdoptInput) (*Adoption, error) {
	a := &Adoption{}
	res := &Result{reuse: true}
	taken := map[string]*Server{}
	for i := range in.Servers {
		taken[in.Servers[i].Name] = &in.Servers[i]
	}
	for _, name := range configEndpoints(in.ConfigText) {
		taken[name] = &Server{Name: name} // runs nothing: no entry is it, and no new server takes its name
	}
	var plans []*filePlan
	for _, f := range Files(in.Getenv, in.GOOS, in.Cwd) {
		data, err := ReadFile(f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		p := &filePlan{f: f, where: f.Client.Name + " " + tildePath(in.Getenv, f.Path), data: data}
		if err != nil {
			a.Left = append(a.Left, fmt.Sprintf("%s: not read: %v", p.where, err))
			continue
		}
		err = a.readFile(in, p, res, taken)
		for _, s := range res.Skipped {
			a.Left = append(a.Left, p.where+": "+s)
		}
		res.Skipped = nil
		if err != nil {
			a.Left = append(a.Left, fmt.Sprintf("%s: left as it is: %v", p.where, err))
			continue
		}
		plans = append(plans, p)
	}
	a.Added = res.Servers
	a.markUnsafe()
	ns := newNames(taken)
	for _, p := range plans {
		a.rewriteFile(in, p, ns)
	}
	if len(a.Added) > 0 || len(a.Endpoints) > 0 {
		text := a.configText(in.ConfigText)
		if _, err := config.Parse(text, "", ""); err != nil {
			return nil, fmt.Errorf("adopt: mux.toml would not load: %w", err)
		}
		a.Rewrites = append(a.Rewrites, Rewrite{Path: in.Config, Old: in.ConfigText, New: text})
	}
	return a, nil
}

// tildePath writes p with ~ for the home folder.
func tildePath(getenv func(string) string, p string) string {
	if home := getenv("HOME"); home != "" && strings.HasPrefix(p, home+string(filepath.Separator)) {
		return "~" + p[len(home):]
	}
	return p
}

// markUnsafe gives the new servers known to lose data when shared
// max_concurrency = 1, with a note that says why, and takes away the
// notes on the tools the editors showed, which their endpoints show.
func (a *Adoption) markUnsafe() {
	for i := range a.Added {
		s := &a.Added[i]
		for _, u := range knownUnsafe {
			if slices.ContainsFunc(s.Args, func(arg string) bool { return strings.HasPrefix(arg, u.arg) }) {
				s.MaxConcurrency = 1
				s.Notes = append(s.Notes, "max_concurrency = 1: "+u.why)
			}
		}
		s.Notes = slices.DeleteFunc(s.Notes, func(n string) bool { // the endpoints show what the editors showed
			k, _, _ := strings.Cut(strings.TrimPrefix(n, "check: "), ":")
			_, filter := toolFilters[k]
			return filter && strings.HasPrefix(n, "check: ")
		})
	}
}

// readFile imports the stdio servers of one editor's file into res and
// notes, in p, the entries that run them, by object of servers.
func (a *Adoption) readFile(in AdoptInput, p *filePlan, res *Result, taken map[string]*Server) error {
	top, _, err := decodeFile(p.data, p.f.Path)
	var fe *formatError
	switch {
	case errors.As(err, &fe):
		return errors.New("not valid " + fe.Format)
	case err != nil:
		return errors.New("not valid JSON")
	}
	sources, err := importSources(top, &Result{})
	if err != nil {
		return err
	}
	for _, src := range sources {
		if src.project == "" {
			src.project = p.f.Project
		}
		src.rules.timeouts = p.f.Client.Timeouts
		g := &group{path: src.path, origin: src.origin, names: slices.Sorted(maps.Keys(src.entries))}
		switch {
		case src.origin != "":
			g.folder = strings.TrimPrefix(src.origin, "project ")
		case src.project != "":
			g.folder = in.Cwd
		}
		for _, orig := range g.names {
			a.readEntry(in, p, g, src, orig, res, taken)
		}
		if len(g.members) > 0 {
			p.groups = append(p.groups, g)
		}
	}
	return nil
}

// readEntry adopts the entry orig of src into g, or notes why not.
func (a *Adoption) readEntry(in AdoptInput, p *filePlan, g *group, src importSource, orig string, res *Result, taken map[string]*Server) {
	label := strconv.Quote(orig)
	if src.origin != "" {
		label += " (" + src.origin + ")"
	}
	e, skip := readEntry(src.entries[orig], src.rules)
	if skip == "" {
		if unknown := unknownKeys(e, src.rules.timeouts); len(unknown) > 0 {
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s left as it is: adopt does not know its %s", label, strings.Join(unknown, ", ")))
			return
		}
		d, _ := entryText(e, "disabled")
		if enabled, _ := entryText(e, "enabled"); d == "true" || enabled == "false" {
			res.Skipped = append(res.Skipped, label+" left as it is: it is disabled in the editor")
			return
		}
	}
	name, through := reachedServer(in, e, taken)
	switch {
	case through && name == "":
		return // it reaches an endpoint of mux.toml already
	case name == "":
		name = res.add(src, orig, taken)
	}
	if name == "" {
		return
	}
	m := member{orig: orig, server: name}
	for _, k := range slices.Sorted(maps.Keys(e)) {
		var tools []string
		_, filter := toolFilters[k]
		switch {
		case slices.Contains(runKeys, k):
		case filter && json.Unmarshal(e[k], &tools) == nil && strings.HasPrefix(toolFilters[k], "only") && len(tools) == 0:
			m.deny = append(m.deny, "*") // it showed none of its tools
		case filter && tools != nil && strings.HasPrefix(toolFilters[k], "only"):
			m.allow = append(m.allow, tools...)
		case filter && tools != nil:
			m.deny = append(m.deny, tools...)
		default:
			a.NotCarried = append(a.NotCarried, notCarried(p.where, label, k, e[k], src.rules.timeouts))
		}
	}
	g.members = append(g.members, m)
}

// reachedServer is the server of mux.toml that the entry e already
// reaches through this mcpmux, by `mcpmux connect NAME` (an adopt before
// endpoints wrote one such entry per server). through says that e runs
// mcpmux connect of this mux.toml, of a server or not.
func reachedServer(in AdoptInput, e map[string]json.RawMessage, taken map[string]*Server) (server string, through bool) {
	command, skip := stdioCommand(e)
	if e == nil || skip != "" {
		return "", false
	}
	entry := editorEntry{command: command}
	_ = json.Unmarshal(e["args"], &entry.args) // not a list of strings: no connect
	_ = json.Unmarshal(e["env"], &entry.env)
	c, ok := parseConnect(entry)
	if !ok {
		return "", false
	}
	own := "" // the config this mcpmux connect loads
	if i := slices.Index(in.Connect, "--config"); i >= 0 && i+1 < len(in.Connect) {
		own = in.Connect[i+1]
	}
	if c.config != own && filepath.Clean(c.config) != in.Config {
		return "", false
	}
	if s := taken[c.name]; s == nil || s.Command == "" { // none, or an endpoint
		return "", true
	}
	return c.name, true
}

// notCarried says that the editor's setting key of an adopted entry is
// not kept.
func notCarried(where, label, key string, v json.RawMessage, timeouts []Timeout) string {
	line := fmt.Sprintf("%s: %s: %s = %s: the one entry that replaces it has no setting per server", where, label, key, v)
	if i := slices.IndexFunc(timeouts, func(t Timeout) bool { return t.Key == key }); i >= 0 {
		line += "; mcpmux's own " + timeouts[i].As + " bounds the server"
	}
	return line
}

// runKeys are the keys of an entry that say what it runs and how, and
// whether the editor runs it: the entry that replaces it says them.
var runKeys = []string{"args", "command", "cwd", "disabled", "enabled", "env", "envFile", "env_vars", "environment", "type"}

// names are the names of mux.toml's servers and endpoints once adopt has
// added its servers: an endpoint it adds takes none of them.
type names struct {
	servers []string        // every server, those added included
	taken   map[string]bool // servers and endpoints
	ownAll  bool            // mux.toml defines the endpoint all, or a server takes its name: it is not every server
	entries map[string]bool // the entries adopt writes, by editor: "codex/mcpmux"
}

// newNames are the names of taken, the servers and the endpoints (which
// run no command) of mux.toml once adopt has added its servers.
func newNames(taken map[string]*Server) *names {
	n := &names{taken: map[string]bool{"all": true}, entries: map[string]bool{}}
	for name, s := range taken {
		if s.Command != "" {
			n.servers = append(n.servers, name)
		}
		n.taken[name] = true
	}
	n.ownAll = taken["all"] != nil
	return n
}

// configEndpoints are the names of the [endpoints.NAME] tables of mux.toml.
func configEndpoints(text []byte) []string {
	var doc struct{ Endpoints map[string]any }
	_ = toml.Unmarshal(text, &doc) // mux.toml loaded: it decodes
	return slices.Sorted(maps.Keys(doc.Endpoints))
}

// claim takes name, or name-2, name-3... when it is taken, and returns it.
func (n *names) claim(base string) string {
	base = sanitizeServerName(base)
	name := base
	for i := 2; n.taken[name]; i++ {
		suffix := "-" + strconv.Itoa(i)
		name = base[:min(len(base), config.MaxServerNameLen-len(suffix))] + suffix
	}
	n.taken[name] = true
	return name
}

// rewriteFile works out the file of p with each group's entries replaced
// by one, and the endpoints they reach.
func (a *Adoption) rewriteFile(in AdoptInput, p *filePlan, n *names) {
	text := p.data
	var lines []string
	for _, g := range p.groups {
		command := slices.Clone(in.Connect)
		target := "the endpoint all"
		if ep, ok := a.endpoint(p, g, n); ok {
			command = append(command, ep.Name)
			target = "the endpoint " + ep.Name
		}
		entry := uniqueEntryName(g, p.f.Client, n)
		var err error
		rw := GroupRewrite{Path: g.path, Name: entry, Command: command}
		for _, m := range g.members {
			rw.Drop = append(rw.Drop, m.orig)
		}
		if p.f.Client.Rewrite != nil {
			text, err = p.f.Client.Rewrite(text, rw)
		} else {
			text, err = p.f.Client.rewriteJSON(text, p.f.Path, rw)
		}
		if err != nil {
			a.Left = append(a.Left, fmt.Sprintf("%s: its servers are in mux.toml, but it is not rewritten: %v; "+
				"`mcpmux client-config --for %s` prints the entry", p.where, err, p.f.Client.For))
			return
		}
		var labels []string
		for _, m := range g.members {
			label := m.orig
			if m.server != m.orig {
				label += " as " + m.server
			}
			labels = append(labels, label)
		}
		line := fmt.Sprintf("%s: %s, as one entry %q (%s)", p.where, strings.Join(labels, ", "), entry, target)
		if g.origin != "" {
			line = fmt.Sprintf("%s (%s): %s, as one entry %q (%s)", p.where, g.origin, strings.Join(labels, ", "), entry, target)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	a.Adopted = append(a.Adopted, lines...)
	a.Rewrites = append(a.Rewrites, Rewrite{Path: p.f.Path, Old: p.data, New: text})
}

// uniqueEntryName is the name of the entry that replaces g's: "mcpmux" in
// a user's file; "mcpmux-PROJECT" in a project's, so that where the editor
// merges the two it does not hide the user's. Neither one the file keeps,
// nor one adopt gives another of the editor's files, is taken twice.
func uniqueEntryName(g *group, c *Client, n *names) string {
	name := "mcpmux"
	if g.folder != "" {
		name += "-" + sanitizeServerName(filepath.Base(g.folder))
	}
	kept := func(n string) bool {
		return slices.Contains(g.names, n) && !slices.ContainsFunc(g.members, func(m member) bool { return m.orig == n })
	}
	for i, base := 2, name; kept(name) || n.entries[c.For+"/"+name]; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	n.entries[c.For+"/"+name] = true
	return name
}

// endpoint is the endpoint g's entry reaches: none (ok false) when that
// is all, as g ran every server and showed each all its tools; else one
// added for it, named after the editor (and the project).
func (a *Adoption) endpoint(p *filePlan, g *group, n *names) (Endpoint, bool) {
	ep := Endpoint{For: p.where}
	if g.origin != "" {
		ep.For += " (" + g.origin + ")"
	}
	views := false
	for _, m := range g.members {
		if !slices.Contains(ep.Servers, m.server) {
			ep.Servers = append(ep.Servers, m.server)
			views = views || m.allow != nil || len(m.deny) > 0
		}
	}
	everyServer := len(ep.Servers) == len(n.servers) && !slices.ContainsFunc(n.servers, func(s string) bool { return !slices.Contains(ep.Servers, s) })
	if everyServer && !views && !n.ownAll {
		return ep, false
	}
	for _, s := range ep.Servers {
		m := g.members[slices.IndexFunc(g.members, func(m member) bool { return m.server == s })]
		ep.AllowTools = append(ep.AllowTools, prefixed(s, m.allow)...)
		ep.DenyTools = append(ep.DenyTools, prefixed(s, m.deny)...)
		if views && m.allow == nil && slices.ContainsFunc(g.members, func(m member) bool { return m.allow != nil }) {
			ep.AllowTools = append(ep.AllowTools, s+endpoint.DefaultSeparator+"*")
		}
	}
	name := p.f.Client.For
	if g.folder != "" {
		name += "-" + filepath.Base(g.folder)
	}
	ep.Name = n.claim(name)
	a.Endpoints = append(a.Endpoints, ep)
	return ep, true
}

// prefixed are tools as an endpoint names them: SERVER__tool.
func prefixed(server string, tools []string) []string {
	var out []string
	for _, t := range tools {
		out = append(out, server+endpoint.DefaultSeparator+t)
	}
	return out
}

// GroupRewrite is one object of servers of an editor's file that adopt
// rewrites: the entries Drop go, and one, Name, runs Command where the
// first of them was.
type GroupRewrite struct {
	Path    []string // the members leading to the object from the top
	Drop    []string // the entries it replaces
	Name    string   // the entry that replaces them
	Command []string // what it runs: mcpmux connect [ENDPOINT]
}

// entryJSON is the entry, on one line of JSON, that makes the editor run
// command.
func (c *Client) entryJSON(command []string) ([]byte, error) {
	var entry any = stdioEntry{Type: c.StdioType, Command: command[0], Args: command[1:]}
	if c.StdioEntry != nil {
		entry = c.StdioEntry(command)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(entry); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// rewriteJSON rewrites the object of servers of g in the JSON text data
// (comments and trailing commas allowed): the entry g.Name takes the place
// of the first entry of g.Drop, and the others go with what separates
// them from the next. Everything else stays byte for byte.
func (c *Client) rewriteJSON(data []byte, file string, g GroupRewrite) ([]byte, error) {
	entry, err := c.entryJSON(g.Command)
	if err != nil {
		return nil, err
	}
	key, _ := json.Marshal(g.Name)
	clean := stripJSONC(data)
	start, end, ok := memberSpan(clean, g.Path)
	if !ok {
		return nil, errors.New("its servers are not where adopt reads them")
	}
	members := objectMembers(clean, start, end)
	if len(members) == 0 {
		return nil, errors.New("its servers are not where adopt reads them")
	}
	var out []byte
	out = append(out, data[:members[0].keyStart]...)
	placed, last := false, -1
	for i, m := range members {
		text := data[m.keyStart:m.valueEnd]
		if slices.Contains(g.Drop, m.name) {
			if placed {
				continue
			}
			placed, text = true, slices.Concat(key, []byte(": "), entry)
		}
		if last >= 0 {
			out = append(out, data[members[last].valueEnd:members[last+1].keyStart]...)
		}
		out, last = append(out, text...), i
	}
	out = append(out, data[members[len(members)-1].valueEnd:]...)
	if _, _, err := decodeFile(out, file); err != nil {
		return nil, fmt.Errorf("the rewritten file does not decode: %w", err)
	}
	return out, nil
}

// jsonMember is where a member of an object is in a JSON text.
type jsonMember struct {
	name               string
	keyStart, valueEnd int
}

// objectMembers are the members of the object data[start:end], in order.
func objectMembers(data []byte, start, end int) []jsonMember {
	dec := json.NewDecoder(bytes.NewReader(data[start:end]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []jsonMember
	for dec.More() {
		from := start + int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out
		}
		for from < end && data[from] != '"' {
			from++ // blanks, the comma
		}
		out = append(out, jsonMember{name, from, start + int(dec.InputOffset())})
	}
	return out
}

// configText is mux.toml with the new servers' and endpoints' tables
// appended.
func (a *Adoption) configText(old []byte) []byte {
	var b bytes.Buffer
	b.Write(old)
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		b.WriteString("\n")
	}
	if len(a.Added) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# mcpmux adopt: %d %s from the editors' files; read the \"check:\" comments.\n",
			len(a.Added), plural(len(a.Added), "server", "servers"))
		for i := range a.Added {
			b.WriteString("\n" + a.Added[i].TOML())
		}
	}
	for _, ep := range a.Endpoints {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# mcpmux adopt: the servers of %s, as its one entry reaches them\n", tomlComment(ep.For))
		b.WriteString("[endpoints." + tomlKey(ep.Name) + "]\nservers = " + tomlStrings(ep.Servers) + "\n")
		if ep.AllowTools != nil {
			b.WriteString("allow_tools = " + tomlStrings(ep.AllowTools) + "\n")
		}
		if len(ep.DenyTools) > 0 {
			b.WriteString("deny_tools = " + tomlStrings(ep.DenyTools) + "\n")
		}
	}
	return b.Bytes()
}

// memberSpan finds the value at path (members of objects, from the top)
// in the JSON text data, as the offsets of its first byte and just past
// its last. As json.Unmarshal does, the last of members of one name wins.
func memberSpan(data []byte, path []string) (start, end int, ok bool) {
	start, end = 0, len(data)
	for _, key := range path {
		if start, end, ok = objectMember(data, start, end, key); !ok {
			return 0, 0, false
		}
	}
	return start, end, true
}

// objectMember finds the member key of the object data[start:end].
func objectMember(data []byte, start, end int, key string) (vstart, vend int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data[start:end]))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, 0, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, 0, false
		}
		after := int(dec.InputOffset()) // just past the member's name
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, false
		}
		if tok == key {
			vend = start + int(dec.InputOffset())
			vstart = start + after
			for vstart < vend && (data[vstart] == ':' || strings.IndexByte(" \t\r\n", data[vstart]) >= 0) {
				vstart++
			}
			ok = true
		}
	}
	return vstart, vend, ok
}

// Apply makes the adoption: each file is backed up beside itself, unless
// a backup of an earlier adoption is there (it holds the file as it was
// before any), then written whole, keeping its mode. A file there was
// none of gets a CreatedSuffix file beside it instead.
func (a *Adoption) Apply() error {
	for _, r := range a.Rewrites {
		mode := fs.FileMode(0o600)
		if fi, err := os.Stat(r.Path); err == nil {
			mode = fi.Mode().Perm()
		}
		_, created := os.Lstat(r.Path + CreatedSuffix)
		if r.Old != nil {
			_, err := os.Lstat(r.Path + BackupSuffix)
			if errors.Is(err, fs.ErrNotExist) && created != nil { // adopt made it: it has no earlier state to keep
				if err := writeFile(r.Path+BackupSuffix, r.Old, mode); err != nil {
					return err
				}
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(r.Path), 0o700); err != nil {
				return fmt.Errorf("adopt: %w", err)
			}
			if err := writeFile(r.Path+CreatedSuffix, nil, 0o600); err != nil {
				return err
			}
		}
		if err := writeFile(resolved(r.Path), r.New, mode); err != nil {
			return err
		}
	}
	return nil
}

// resolved is the file path names, through symbolic links (a dotfile kept
// elsewhere stays a link, its target rewritten); path itself when there
// is none yet.
func resolved(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// writeFile replaces path by data at once: written beside it, then renamed.
func writeFile(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("adopt: %w", err)
	}
	defer os.Remove(tmp.Name()) // once renamed, there is none
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("adopt: write %s: %w", path, err)
	}
	return nil
}

// AdoptedFiles are the files adopt may have rewritten: the editors' files
// where doctor looks, and mux.toml.
func AdoptedFiles(getenv func(string) string, goos, cwd, config string) []string {
	var paths []string
	for _, f := range Files(getenv, goos, cwd) {
		paths = append(paths, f.Path)
	}
	return append(paths, config)
}

// Undo puts back each of paths that has a backup beside it, and removes
// each that adopt created, and returns those it put back or removed.
func Undo(paths []string) ([]string, error) {
	var restored []string
	for _, p := range paths {
		_, backup := os.Lstat(p + BackupSuffix)
		_, created := os.Lstat(p + CreatedSuffix)
		var err error
		switch {
		case created == nil: // there was none before adopt
			for _, f := range []string{p, p + BackupSuffix, p + CreatedSuffix} {
				if rerr := os.Remove(f); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
					err = rerr
				}
			}
		case backup == nil:
			err = restore(p)
		default:
			continue
		}
		if err != nil {
			return restored, fmt.Errorf("adopt --undo: %w", err)
		}
		restored = append(restored, p)
	}
	return restored, nil
}

// restore writes the backup of path back into it (through links), then
// removes the backup.
func restore(path string) error {
	data, err := os.ReadFile(path + BackupSuffix)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path + BackupSuffix)
	if err != nil {
		return err
	}
	if err := writeFile(resolved(path), data, fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Remove(path + BackupSuffix)
}

// Diff shows the lines of old that new changes, as one hunk of a unified
// diff (adopt's changes are a few entries of a file).
func Diff(path string, old, new []byte) string {
	if bytes.Equal(old, new) {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out strings.Builder
	from := "--- " + path + "\n"
	if old == nil {
		from = "--- /dev/null\n"
	}
	out.WriteString(from + "+++ " + path + "\n")
	fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", pre+1, len(a)-pre-suf, pre+1, len(b)-pre-suf)
	for _, l := range a[pre : len(a)-suf] {
		out.WriteString("-" + l + "\n")
	}
	for _, l := range b[pre : len(b)-suf] {
		out.WriteString("+" + l + "\n")
	}
	return out.String()
}

func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
