package mux

import (
	"encoding/json"
	"fmt"

	"github.com/mcpmux/mcpmux/protocol"
)

// era is the protocol era of a server process or of a session.
type era uint8

const (
	eraUnknown era = iota // a session that has not said yet
	eraLegacy             // 2024-11-05 to 2025-11-25: initialize, per-connection state
)

func (e era) String() string {
	switch e {
	case eraLegacy:
		return "legacy"
	}
	return ""
}

// serverInfo is what a server said of itself when it was opened (for a
// legacy server, its InitializeResult, kept whole), with the parts the hub
// looks at. Every session is answered from it.
type serverInfo struct {
	era        era
	raw        map[string]json.RawMessage
	caps       map[string]json.RawMessage
	version    string
	serverName string
}

func parseInitResult(raw json.RawMessage) (*serverInfo, error) {
	r := &serverInfo{era: eraLegacy}
	if err := json.Unmarshal(raw, &r.raw); err != nil {
		return nil, fmt.Errorf("InitializeResult is not an object: %w", err)
	}
	if err := json.Unmarshal(r.raw["protocolVersion"], &r.version); err != nil {
		return nil, fmt.Errorf("InitializeResult has no protocolVersion string")
	}
	if !protocol.IsLegacy(r.version) {
		return nil, fmt.Errorf("server chose protocol version %q, which mcpmux does not speak", r.version)
	}
	if c := r.raw["capabilities"]; len(c) > 0 && string(c) != "null" {
		if err := json.Unmarshal(c, &r.caps); err != nil {
			return nil, fmt.Errorf("InitializeResult capabilities is not an object: %w", err)
		}
	}
	var info struct {
		Name string `json:"name"`
	}
	json.Unmarshal(r.raw["serverInfo"], &info)
	r.serverName = info.Name
	return r, nil
}

func (r *serverInfo) has(capability string) bool {
	v, ok := r.caps[capability]
	return ok && string(v) != "null"
}

// incompatible says why sessions that negotiated against r cannot stay on a
// server that now answers cur; "" when they can.
func (r *serverInfo) incompatible(cur *serverInfo) string {
	if r.version != cur.version {
		return fmt.Sprintf("protocol version %s instead of %s", cur.version, r.version)
	}
	for name := range r.caps {
		if r.has(name) && !cur.has(name) {
			return fmt.Sprintf("capability %q gone", name)
		}
	}
	return ""
}

// negotiate picks the version a session gets: its own if mcpmux knows it and
// the server speaks it or newer, else the server's (the client decides).
func (r *serverInfo) negotiate(requested string) string {
	if protocol.IsLegacy(requested) && requested <= r.version {
		return requested
	}
	return r.version
}

// forSession is the InitializeResult a session receives: the server's, with
// the session's version, and capabilities edited to what mcpmux can promise:
// listChanged on every list it has (mcpmux sends those after a restart), and
// no tasks.list (the server would list every session's tasks).
func (r *serverInfo) forSession(version string) (json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(r.raw))
	for k, v := range r.raw {
		out[k] = v
	}
	v, _ := json.Marshal(version)
	out["protocolVersion"] = v

	caps := make(map[string]json.RawMessage, len(r.caps))
	for name, c := range r.caps {
		caps[name] = c
	}
	for _, name := range []string{"tools", "prompts", "resources"} {
		if !r.has(name) {
			continue
		}
		edited, err := setMember(caps[name], "listChanged", json.RawMessage("true"))
		if err != nil {
			return nil, fmt.Errorf("capability %s: %w", name, err)
		}
		caps[name] = edited
	}
	if r.has("tasks") {
		var tasks map[string]json.RawMessage
		if json.Unmarshal(caps["tasks"], &tasks) == nil {
			delete(tasks, "list")
			caps["tasks"], _ = json.Marshal(tasks)
		}
	}
	b, err := json.Marshal(caps)
	if err != nil {
		return nil, err
	}
	out["capabilities"] = b
	return json.Marshal(out)
}

func setMember(obj json.RawMessage, key string, val json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(obj) > 0 && string(obj) != "null" {
		if err := json.Unmarshal(obj, &m); err != nil {
			return nil, err
		}
	}
	m[key] = val
	return json.Marshal(m)
}

// hasPath reports whether a capability has a member, such as
// ("resources", "subscribe") or ("tasks", "cancel"), that is not false or null.
func (r *serverInfo) hasPath(capability, member string) bool {
	c, ok := r.caps[capability]
	if !ok {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(c, &m) != nil {
		return false
	}
	v, ok := m[member]
	return ok && string(v) != "null" && string(v) != "false"
}
