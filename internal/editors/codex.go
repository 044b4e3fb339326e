package editors

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
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
