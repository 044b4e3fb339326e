package editors

import (
	"bytes"
	"encoding/json"
)

// Zed keeps its servers in its settings.json (comments and trailing commas
// allowed) under "context_servers": a server it runs by a command is
// flat, "command", "args" and "env", where older versions nested them in
// "command": {"path", "args", "env"}; one a Zed extension provides names
// no command.

// zedEntry rewrites a Zed entry in the shape most editors share.
func zedEntry(e map[string]json.RawMessage) (skip string) {
	var nested struct {
		Path json.RawMessage `json:"path"`
		Args json.RawMessage `json:"args"`
		Env  json.RawMessage `json:"env"`
	}
	if cmd := bytes.TrimSpace(e["command"]); bytes.HasPrefix(cmd, []byte("{")) && json.Unmarshal(cmd, &nested) == nil {
		e["command"] = nested.Path
		for k, v := range map[string]json.RawMessage{"args": nested.Args, "env": nested.Env} {
			if v != nil {
				e[k] = v
			}
		}
	}
	source, _ := entryText(e, "source")
	delete(e, "source")
	if _, ok := e["command"]; !ok && (source == "extension" || e["settings"] != nil) {
		return "is provided by a Zed extension, which starts it: mcpmux serves servers it starts by their command"
	}
	return ""
}
