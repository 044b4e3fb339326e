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
)

// What mcpmux adopt does: the servers the editors' files on this machine
// run are imported into mux.toml, and each file's entries are rewritten to
// run `mcpmux connect NAME` instead, every file backed up beside itself
// first (FILE.mcpmux-backup), so that Undo puts each back as it was.

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
	// Connect is the command line that reaches a server through mcpmux,
	// without its name: mcpmux's absolute path, "connect", and --config
	// when mux.toml is not in its default place.
	Connect []string
}

// Adoption is what adopt would do.
type Adoption struct {
	Added    []Server  // new servers, appended to mux.toml
	Rewrites []Rewrite // the files it rewrites, mux.toml last
	Adopted  []string  // one line per editor file: its entries that now run through mcpmux
	Left     []string  // files not read and entries left as they are, one line each
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

// PlanAdoption reads the editors' files (where doctor looks) and works out
// the adoption; it writes nothing.
func PlanAdoption(in AdoptInput) (*Adoption, error) {
	a := &Adoption{}
	res := &Result{reuse: true}
	taken := map[string]*Server{}
	for i := range in.Servers {
		taken[in.Servers[i].Name] = &in.Servers[i]
	}
	tilde := func(p string) string {
		if home := in.Getenv("HOME"); home != "" && strings.HasPrefix(p, home+string(filepath.Separator)) {
			return "~" + p[len(home):]
		}
		return p
	}
	for _, f := range Files(in.Getenv, in.GOOS, in.Cwd) {
		data, err := ReadFile(f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		where := f.Client.Name + " " + tilde(f.Path)
		if err != nil {
			a.Left = append(a.Left, fmt.Sprintf("%s: not read: %v", where, err))
			continue
		}
		newText, names, err := a.adoptFile(in, f, data, res, taken)
		for _, s := range res.Skipped {
			a.Left = append(a.Left, where+": "+s)
		}
		res.Skipped = nil
		if err != nil {
			a.Left = append(a.Left, fmt.Sprintf("%s: left as it is: %v", where, err))
			continue
		}
		if len(names) > 0 {
			a.Adopted = append(a.Adopted, where+": "+strings.Join(names, ", "))
			a.Rewrites = append(a.Rewrites, Rewrite{Path: f.Path, Old: data, New: newText})
		}
	}
	a.Added = res.Servers
	for i := range a.Added {
		s := &a.Added[i]
		for _, u := range knownUnsafe {
			if slices.ContainsFunc(s.Args, func(arg string) bool { return strings.HasPrefix(arg, u.arg) }) {
				s.MaxConcurrency = 1
				s.Notes = append(s.Notes, "max_concurrency = 1: "+u.why)
			}
		}
	}
	if len(a.Added) > 0 {
		a.Rewrites = append(a.Rewrites, Rewrite{Path: in.Config, Old: in.ConfigText, New: a.configText(in.ConfigText)})
	}
	return a, nil
}

// adoptFile imports the stdio servers of one editor's file and rewrites
// their entries to run mcpmux connect; it returns the new text and the
// entries rewritten, as "entry" or "entry as name".
func (a *Adoption) adoptFile(in AdoptInput, f File, data []byte, res *Result, taken map[string]*Server) ([]byte, []string, error) {
	top, _, err := decodeFile(data, f.Path)
	var fe *formatError
	switch {
	case errors.As(err, &fe):
		return nil, nil, errors.New("not valid " + fe.Format)
	case err != nil:
		return nil, nil, errors.New("not valid JSON")
	}
	sources, err := importSources(top, &Result{})
	if err != nil {
		return nil, nil, err
	}
	for i := range sources {
		if sources[i].project == "" {
			sources[i].project = f.Project
		}
		sources[i].rules.timeouts = f.Client.Timeouts
	}
	clean := stripJSONC(data)
	type edit struct {
		start, end int
		text       []byte
	}
	var edits []edit
	var names []string
	var rewrites []EntryRewrite
	for _, src := range sources {
		for _, orig := range slices.Sorted(maps.Keys(src.entries)) {
			if e, skip := readEntry(src.entries[orig], src.rules); skip == "" {
				if unknown := unknownKeys(e, src.rules.timeouts); len(unknown) > 0 {
					label := strconv.Quote(orig)
					if src.origin != "" {
						label += " (" + src.origin + ")"
					}
					res.Skipped = append(res.Skipped, fmt.Sprintf("%s left as it is: adopt does not know its %s", label, strings.Join(unknown, ", ")))
					continue
				}
			}
			name := res.add(src, orig, taken)
			if name == "" {
				continue
			}
			command := append(slices.Clone(in.Connect), name)
			if f.Client.Rewrite != nil {
				rewrites = append(rewrites, EntryRewrite{Path: append(slices.Clone(src.path), orig), Command: command, Old: src.entries[orig]})
			} else {
				start, end, ok := memberSpan(clean, append(slices.Clone(src.path), orig))
				if !ok {
					continue
				}
				text, err := f.Client.connectEntry(command, src.entries[orig])
				if err != nil {
					return nil, nil, err
				}
				edits = append(edits, edit{start, end, text})
			}
			label := orig
			if name != orig {
				label += " as " + name
			}
			if src.origin != "" {
				label += " (" + src.origin + ")"
			}
			names = append(names, label)
		}
	}
	if f.Client.Rewrite != nil && len(rewrites) > 0 {
		out, err := f.Client.Rewrite(data, rewrites)
		if err != nil {
			return nil, nil, fmt.Errorf("its servers are in mux.toml, but it is not rewritten: %w; `mcpmux client-config NAME --for %s` prints each entry", err, f.Client.For)
		}
		return out, names, nil
	}
	slices.SortFunc(edits, func(x, y edit) int { return y.start - x.start }) // from the end: offsets before stay
	out := bytes.Clone(data)
	for _, e := range edits {
		out = slices.Concat(out[:e.start], e.text, out[e.end:])
	}
	return out, names, nil
}

// runKeys are the keys of an entry that say what it runs and how: adopt
// replaces them. The others (timeouts, tools shown, disabled) are the
// editor's own and stay.
var runKeys = []string{"args", "command", "cwd", "env", "envFile", "env_vars", "environment", "type"}

// EntryRewrite is one entry of an editor's file that adopt rewrites.
type EntryRewrite struct {
	Path    []string        // the members leading to it from the top
	Command []string        // what it is to run: mcpmux connect NAME
	Old     json.RawMessage // the entry as it was, as JSON
}

// connectEntry is the entry, on one line of JSON, that makes the editor
// run command, with the members of old that are not runKeys.
func (c *Client) connectEntry(command []string, old json.RawMessage) ([]byte, error) {
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
	text := bytes.TrimSuffix(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte("}"))
	var members, written map[string]json.RawMessage
	if err := json.Unmarshal(old, &members); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b.Bytes(), &written); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(members)) {
		var v bytes.Buffer
		if _, dup := written[k]; dup || slices.Contains(runKeys, k) || json.Compact(&v, members[k]) != nil {
			continue
		}
		key, _ := json.Marshal(k)
		text = slices.Concat(text, []byte(","), key, []byte(":"), v.Bytes())
	}
	return append(text, '}'), nil
}

// configText is mux.toml with the new servers' tables appended.
func (a *Adoption) configText(old []byte) []byte {
	var b bytes.Buffer
	b.Write(old)
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		b.WriteString("\n")
	}
	if len(old) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "# mcpmux adopt: %d %s from the editors' files; read the \"check:\" comments.\n",
		len(a.Added), plural(len(a.Added), "server", "servers"))
	for i := range a.Added {
		b.WriteString("\n" + a.Added[i].TOML())
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
