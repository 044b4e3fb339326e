package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// fileError is one problem in a config file, located by line and key.
type fileError struct {
	File string // the name given to Parse; may be ""
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path, such as servers.memory.stdin_grace; may be ""
	Msg  string
}

// Error formats the problem as "file:line: key: message", leaving out the
// parts that are unknown.
func (e *fileError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// tomlError turns a go-toml error (bad syntax, a key or table defined twice)
// into a fileError carrying its line and, when there is one, the key's
// full path. go-toml gives a key-value's key relative to its table, so the
// table in effect on that line is put in front.
func tomlError(file string, data []byte, err error) error {
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return fmt.Errorf("%s: %w", cmp.Or(file, "config"), err)
	}
	line, _ := de.Position()
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	key := keyPath(de.Key())
	if len(key) == 0 {
		msg = "invalid TOML: " + msg
	} else if idx, err := indexKeys(data); err == nil {
		if table, ok := idx.tables[line]; ok {
			key = append(slices.Clip(table), key...)
		}
	}
	return &fileError{File: file, Line: line, Key: key.String(), Msg: msg}
}

// keyPath is a key's full path from the document root, one element per part.
type keyPath []string

// with returns the path of the child key k; p itself is never modified.
func (p keyPath) with(k string) keyPath {
	return append(slices.Clip(p), k)
}

// id is the path as a map key; unlike String, it cannot be ambiguous.
func (p keyPath) id() string {
	return strings.Join(p, "\x00")
}

// String writes the path the way it could appear in TOML: parts joined by
// dots, quoting those that are not bare keys (servers."my server").
func (p keyPath) String() string {
	parts := make([]string, len(p))
	for i, k := range p {
		parts[i] = k
		if !IsBareKey(k) {
			parts[i] = strconv.Quote(k)
		}
	}
	return strings.Join(parts, ".")
}

// IsBareKey reports whether k may be written as an unquoted TOML key.
func IsBareKey(k string) bool {
	return k != "" && !strings.ContainsFunc(k, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	})
}

// keyIndex locates keys in a document.
type keyIndex struct {
	// lines maps the id of every key path to the line where the path first
	// appears: a table header, a (dotted) key, or a key inside an inline
	// table. Implicitly created parents get the line of their first child.
	lines map[string]int
	// tables maps the line of each top-level key-value to the path of the
	// table it is in (nil for the root table).
	tables map[int]keyPath
	// written holds the id of every path written out whole as a key: a
	// table header's, a key-value's (dotted or not). The other paths are
	// tables made implicitly on the way, such as a in a.b = 1.
	written map[string]bool
}

// indexKeys walks a document with go-toml's unstable parser to build its
// keyIndex. It does not check TOML semantics such as duplicate keys.
func indexKeys(data []byte) (*keyIndex, error) {
	var newlines []int
	for i, c := range data {
		if c == '\n' {
			newlines = append(newlines, i)
		}
	}
	lineAt := func(offset uint32) int {
		n, _ := slices.BinarySearch(newlines, int(offset))
		return n + 1
	}

	idx := &keyIndex{lines: make(map[string]int), tables: make(map[int]keyPath), written: make(map[string]bool)}
	lines := idx.lines
	// addKey records each part of a (dotted) key under base and returns the full path.
	addKey := func(base keyPath, it unstable.Iterator) keyPath {
		p := slices.Clip(base)
		for it.Next() {
			k := it.Node()
			p = append(p, string(k.Data))
			if _, seen := lines[p.id()]; !seen {
				lines[p.id()] = lineAt(k.Raw.Offset)
			}
		}
		return p
	}
	var addKeyValue func(base keyPath, kv *unstable.Node)
	addKeyValue = func(base keyPath, kv *unstable.Node) {
		p := addKey(base, kv.Key())
		idx.written[p.id()] = true
		if v := kv.Value(); v.Kind == unstable.InlineTable {
			for it := v.Children(); it.Next(); {
				if c := it.Node(); c.Kind == unstable.KeyValue {
					addKeyValue(p, c)
				}
			}
		}
	}

	var p unstable.Parser
	p.Reset(data)
	var table keyPath
	for p.NextExpression() {
		switch e := p.Expression(); e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = addKey(nil, e.Key())
			idx.written[table.id()] = true
		case unstable.KeyValue:
			idx.tables[lineAt(e.Raw.Offset)] = table
			addKeyValue(table, e)
		}
	}
	if err := p.Error(); err != nil {
		// go-toml already accepted the document, so this is not expected.
		return nil, fmt.Errorf("invalid TOML: %w", err)
	}
	return idx, nil
}

// tomlType names the TOML type of a value decoded by go-toml, for messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "a date or time"
	}
	return fmt.Sprintf("%T", v)
}
