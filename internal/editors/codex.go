package editors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Codex keeps its servers in TOML, ~/.codex/config.toml and a trusted
// project's .codex/config.toml, as [mcp_servers.NAME] tables with the keys
// most editors' JSON entries have ("command", "args", "env", "cwd").

// decodeCodex reads a Codex config.toml as JSON members, so that its
// [mcp_servers.NAME] tables are read as any editor's object of servers.
func decodeCodex(data []byte) (map[string]json.RawMessage, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		fe := &formatError{Line: 1, Col: 1, Format: "TOML", Msg: err.Error()}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			fe.Line, fe.Col = de.Position()
		}
		return nil, fe
	}
	top := make(map[string]json.RawMessage, len(doc))
	for k, v := range doc {
		raw, err := json.Marshal(v)
		if err != nil {
			continue // a value JSON cannot hold belongs to some other setting
		}
		top[k] = raw
	}
	return top, nil
}

// codexStdio and codexHTTP are the entries client-config writes for Codex.
type (
	codexStdio struct{ command []string }
	codexHTTP  struct {
		url     string
		headers map[string]string
	}
)

// printCodex writes entry as Codex's [mcp_servers.NAME] table.
func printCodex(w io.Writer, name string, entry any) error {
	var b strings.Builder
	b.WriteString("[mcp_servers." + tomlKey(name) + "]\n")
	switch e := entry.(type) {
	case codexStdio:
		b.WriteString("command = " + tomlString(e.command[0]) + "\n")
		b.WriteString("args = " + tomlStrings(e.command[1:]) + "\n")
	case codexHTTP:
		b.WriteString("url = " + tomlString(e.url) + "\n")
		var headers []string
		for _, k := range slices.Sorted(maps.Keys(e.headers)) {
			headers = append(headers, tomlKey(k)+" = "+tomlString(e.headers[k]))
		}
		b.WriteString("http_headers = { " + strings.Join(headers, ", ") + " }\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rewriteCodex rewrites the [mcp_servers.NAME] tables of g.Drop into
// one, [mcp_servers.<g.Name>], that runs g.Command, where the first of
// them was; the others go, with their sub-tables and the blank lines after
// them. The rest of the file stays byte for byte. A table written in
// another form than a [mcp_servers.NAME] header (an inline table, dotted
// keys) is not rewritten; the result is checked by decoding it.
func rewriteCodex(data []byte, g GroupRewrite) ([]byte, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	headers := map[int][]string{} // line -> the header's key path
	for i, l := range lines {
		if p, ok := tomlHeader(l); ok {
			headers[i] = p
		}
	}
	type span struct{ from, to int } // lines
	var spans []span
	for _, name := range g.Drop {
		path := append(slices.Clone(g.Path), name)
		from := -1
		for i := range lines {
			if p, ok := headers[i]; ok && slices.Equal(p, path) {
				from = i
			}
		}
		if from < 0 {
			return nil, fmt.Errorf("no [%s] table", strings.Join(path, "."))
		}
		to := from + 1
		for ; to < len(lines); to++ {
			if p, ok := headers[to]; ok && !(len(p) > len(path) && slices.Equal(p[:len(path)], path)) {
				break
			}
		}
		for to > from+1 && isBlankOrComment(lines[to-1]) { // they lead into the next table
			to--
		}
		spans = append(spans, span{from, to})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var out []byte
	next := 0
	for i, sp := range spans {
		if sp.from < next {
			return nil, errors.New("tables overlap")
		}
		out = append(out, bytes.Join(lines[next:sp.from], nil)...)
		next = sp.to
		if i == 0 {
			out = append(out, codexTable(g)...)
			continue
		}
		for next < len(lines) && len(bytes.TrimSpace(lines[next])) == 0 {
			next++ // no run of blank lines where it was
		}
	}
	rest := bytes.Join(lines[next:], nil)
	if len(spans) > 1 && len(bytes.TrimSpace(rest)) == 0 { // the last table went: so do the blank lines before it
		out = append(bytes.TrimRight(out, " \t\r\n"), '\n')
	}
	out = append(out, rest...)
	if err := checkCodexRewrite(data, out, g); err != nil {
		return nil, err
	}
	return out, nil
}

// codexTable writes the table of the entry that replaces the group.
func codexTable(g GroupRewrite) []byte {
	var path []string
	for _, k := range append(slices.Clone(g.Path), g.Name) {
		path = append(path, tomlKey(k))
	}
	return []byte("[" + strings.Join(path, ".") + "]\n" +
		"command = " + tomlString(g.Command[0]) + "\n" +
		"args = " + tomlStrings(g.Command[1:]) + "\n")
}

// checkCodexRewrite checks that the rewritten file decodes to the old one
// with only the group's entries changed, into the one that runs its command.
func checkCodexRewrite(old, new []byte, g GroupRewrite) error {
	var was, is map[string]any
	if toml.Unmarshal(old, &was) != nil {
		return errors.New("not valid TOML")
	}
	if err := toml.Unmarshal(new, &is); err != nil {
		return fmt.Errorf("the rewritten file does not decode: %w", err)
	}
	w, i := lookup(was, g.Path), lookup(is, g.Path)
	entry, ok := i[g.Name].(map[string]any)
	if w == nil || i == nil || !ok || entry["command"] != g.Command[0] || w[g.Name] != nil {
		return fmt.Errorf("[%s] is not where adopt reads it", strings.Join(append(slices.Clone(g.Path), g.Name), "."))
	}
	for _, name := range g.Drop {
		delete(w, name)
	}
	delete(i, g.Name)
	wj, _ := json.Marshal(was)
	ij, _ := json.Marshal(is)
	if !bytes.Equal(wj, ij) {
		return errors.New("the rewrite would change more than the servers' tables")
	}
	return nil
}

// lookup follows path through nested tables; nil when it leads to none.
func lookup(doc map[string]any, path []string) map[string]any {
	for _, k := range path {
		next, ok := doc[k].(map[string]any)
		if !ok {
			return nil
		}
		doc = next
	}
	return doc
}

// isBlankOrComment reports whether a TOML line holds nothing but a comment.
func isBlankOrComment(line []byte) bool {
	t := bytes.TrimSpace(line)
	return len(t) == 0 || t[0] == '#'
}

// tomlHeader reads a table header line, [a.b."c d"] (or [[a.b]]), into its
// key path; ok is false for any other line.
func tomlHeader(line []byte) (path []string, ok bool) {
	s := strings.TrimSpace(string(line))
	if i := strings.LastIndex(s, "]"); i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "#") {
		s = s[:i+1] // a comment after the header
	}
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return nil, false
	}
	s = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "["), "["), "]"), "]")
	for {
		s = strings.TrimLeft(s, " \t")
		var key string
		switch {
		case strings.HasPrefix(s, `"`):
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return nil, false
			}
			k, err := strconv.Unquote(s[:end+1])
			if err != nil {
				return nil, false
			}
			key, s = k, s[end+1:]
		case strings.HasPrefix(s, "'"):
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return nil, false
			}
			key, s = s[1:end+1], s[end+2:]
		default:
			end := strings.IndexFunc(s, func(r rune) bool {
				return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
			})
			if end < 0 {
				end = len(s)
			}
			if end == 0 {
				return nil, false
			}
			key, s = s[:end], s[end:]
		}
		path = append(path, key)
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return path, true
		}
		if s[0] != '.' {
			return nil, false
		}
		s = s[1:]
	}
}
