package editors

import (
	"encoding/json"
	"slices"
)

// opencode keeps its servers in opencode.json (or .jsonc), in the user's
// ~/.config/opencode and in a project's folder, under "mcp" (and, in its
// second version, "mcp": {"servers": ...}), each with a "type" of "local"
// or "remote", a "command" that is one array, and "environment".

// opencodeServers accepts an object of servers whose every entry has the
// type of an opencode entry: another tool's object at the same path (VS
// Code's "mcp") is left to it.
func opencodeServers(entries map[string]json.RawMessage) bool {
	for _, raw := range entries {
		var e map[string]json.RawMessage
		if json.Unmarshal(raw, &e) != nil {
			return false
		}
		if typ, _ := entryText(e, "type"); !slices.Contains([]string{"local", "remote"}, typ) {
			return false
		}
	}
	return true
}

// opencodeEntry rewrites an opencode entry in the shape most editors share.
func opencodeEntry(e map[string]json.RawMessage) (skip string) {
	typ, _ := entryText(e, "type")
	delete(e, "type")
	if typ == "remote" {
		e["type"] = json.RawMessage(`"http"`) // reached by its "url"
		return ""
	}
	var command []json.RawMessage
	if json.Unmarshal(e["command"], &command) == nil {
		if len(command) == 0 {
			return "has no command"
		}
		e["command"] = command[0]
		if _, ok := e["args"]; !ok {
			e["args"], _ = json.Marshal(command[1:])
		}
	}
	if env, ok := e["environment"]; ok {
		if _, has := e["env"]; !has {
			e["env"] = env
		}
		delete(e, "environment")
	}
	return ""
}

// opencodeStdio and opencodeHTTP are the entries client-config writes for
// opencode.
type (
	opencodeStdio struct {
		Type    string   `json:"type"`
		Command []string `json:"command"`
		Enabled bool     `json:"enabled"`
	}
	opencodeHTTP struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Enabled bool              `json:"enabled"`
		Headers map[string]string `json:"headers"`
	}
)
