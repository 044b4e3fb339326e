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

// rewriteCodex rewrites the [mcp_servers.NAME] tables of entries: each,
// with its sub-tables, becomes a table that runs the entry's command,
// with the keys of the old one that are Codex's own (runKeys excepted).
// The rest of the file stays byte for byte. A table written in another
// form than a [mcp_servers.NAME] header (an inline table, dotted keys) is
// not rewritten; the result is checked by decoding it.
func rewriteCodex(data []byte, entries []EntryRewrite) ([]byte, error) {
	lines := bytes.SplitAfter(data, []byte("\n"))
	headers := map[int][]string{} // line -> the header's key path
	for i, l := range lines {
		if p, ok := tomlHeader(l); ok {
			headers[i] = p
		}
	}
	type span struct{ from, to int } // lines
	var spans []span
	var texts [][]byte
	for _, e := range entries {
		from := -1
		for i := range lines {
			if p, ok := headers[i]; ok && slices.Equal(p, e.Path) {
				from = i
			}
		}
		if from < 0 {
			return nil, fmt.Errorf("no [%s] table", strings.Join(e.Path, "."))
		}
		to := from + 1
		for ; to < len(lines); to++ {
			if p, ok := headers[to]; ok && !(len(p) > len(e.Path) && slices.Equal(p[:len(e.Path)], e.Path)) {
				break
			}
		}
		for to > from+1 && isBlankOrComment(lines[to-1]) { // they lead into the next table
			to--
		}
		text, err := codexTable(e)
		if err != nil {
			return nil, err
		}
		spans = append(spans, span{from, to})
		texts = append(texts, text)
	}
	var out []byte
	next := 0
	for _, i := range slices.SortedFunc(slices.Values(indexes(len(spans))), func(a, b int) int { return spans[a].from - spans[b].from }) {
		if spans[i].from < next {
			return nil, errors.New("tables overlap")
		}
		out = append(out, bytes.Join(lines[next:spans[i].from], nil)...)
		out = append(out, texts[i]...)
		next = spans[i].to
	}
	out = append(out, bytes.Join(lines[next:], nil)...)
	if err := checkCodexRewrite(data, out, entries); err != nil {
		return nil, err
	}
	return out, nil
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// codexTable writes the table of one rewritten entry.
func codexTable(e EntryRewrite) ([]byte, error) {
	var b strings.Builder
	var path []string
	for _, k := range e.Path {
		path = append(path, tomlKey(k))
	}
	b.WriteString("[" + strings.Join(path, ".") + "]\n")
	b.WriteString("command = " + tomlString(e.Command[0]) + "\n")
	b.WriteString("args = " + tomlStrings(e.Command[1:]) + "\n")
	var old map[string]json.RawMessage
	if err := json.Unmarshal(e.Old, &old); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if slices.Contains(runKeys, k) {
			continue
		}
		v, ok := tomlValue(old[k])
		if !ok {
			return nil, fmt.Errorf("%s has a value adopt cannot write back", k)
		}
		b.WriteString(tomlKey(k) + " = " + v + "\n")
	}
	return []byte(b.String()), nil
}

// tomlValue writes a JSON value as a TOML one: arrays and objects inline.
func tomlValue(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	return tomlAny(v)
}

func tomlAny(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return tomlString(v), true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		return v.String(), true
	case []any:
		var items []string
		for _, x := range v {
			s, ok := tomlAny(x)
			if !ok {
				return "", false
			}
			items = append(items, s)
		}
		return "[" + strings.Join(items, ", ") + "]", true
	case map[string]any:
		var items []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			s, ok := tomlAny(v[k])
			if !ok {
				return "", false
			}
			items = append(items, tomlKey(k)+" = "+s)
		}
		return "{ " + strings.Join(items, ", ") + " }", true
	}
	return "", false
}

// checkCodexRewrite checks that the rewritten file decodes to the old one
// with only the entries changed, each to run its command.
func checkCodexRewrite(old, new []byte, entries []EntryRewrite) error {
	var was, is map[string]any
	if toml.Unmarshal(old, &was) != nil {
		return errors.New("not valid TOML")
	}
	if err := toml.Unmarshal(new, &is); err != nil {
		return fmt.Errorf("the rewritten file does not decode: %w", err)
	}
	for _, e := range entries {
		w, i := lookup(was, e.Path[:len(e.Path)-1]), lookup(is, e.Path[:len(e.Path)-1])
		name := e.Path[len(e.Path)-1]
		entry, ok := i[name].(map[string]any)
		if w == nil || i == nil || !ok || entry["command"] != e.Command[0] {
			return fmt.Errorf("[%s] is not where adopt reads it", strings.Join(e.Path, "."))
		}
		w[name], i[name] = nil, nil
	}
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
