package mux

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// serverInfo is what a server said of itself when it was opened: a legacy
// server's InitializeResult or a modern server's DiscoverResult, kept whole,
// with the parts the hub looks at. Every session is answered from it, in the
// shape of the session's era.
type serverInfo struct {
	era        era
	raw        map[string]json.RawMessage // the result, member by member
	caps       map[string]json.RawMessage
	version    string          // legacy: the revision the server chose; modern: protocol.Modern
	versions   []string        // modern: the supportedVersions of its server/discover
	implInfo   json.RawMessage // serverInfo (an Implementation), nil when the server gave none
	serverName string
	result     json.RawMessage // the result as the server sent it, which Memory keeps
}

func parseInitResult(raw json.RawMessage) (*serverInfo, error) {
	r := &serverInfo{era: eraLegacy, result: raw}
	if err := json.Unmarshal(raw, &r.raw); err != nil {
		return nil, fmt.Errorf("InitializeResult is not an object: %w", err)
	}
	if err := json.Unmarshal(r.raw["protocolVersion"], &r.version); err != nil {
		return nil, fmt.Errorf("InitializeResult has no protocolVersion string")
	}
	if !protocol.IsLegacy(r.version) {
		return nil, fmt.Errorf("server chose protocol version %q, which mcpmux does not speak", r.version)
	}
	if err := r.parseCaps(); err != nil {
		return nil, fmt.Errorf("InitializeResult %w", err)
	}
	r.setImpl(r.raw["serverInfo"])
	return r, nil
}

// parseDiscoverResult reads a modern server's answer to server/discover; an
// error means it is not one mcpmux can serve modern.
func parseDiscoverResult(raw json.RawMessage) (*serverInfo, error) {
	r := &serverInfo{era: eraModern, version: protocol.Modern, result: raw}
	if err := json.Unmarshal(raw, &r.raw); err != nil {
		return nil, fmt.Errorf("DiscoverResult is not an object: %w", err)
	}
	var versions []string
	if err := json.Unmarshal(r.raw["supportedVersions"], &versions); err != nil {
		return nil, fmt.Errorf("DiscoverResult has no supportedVersions list")
	}
	if !slices.Contains(versions, protocol.Modern) {
		return nil, fmt.Errorf("server supports %v, not %s", versions, protocol.Modern)
	}
	r.versions = versions
	if err := r.parseCaps(); err != nil {
		return nil, fmt.Errorf("DiscoverResult %w", err)
	}
	var meta map[string]json.RawMessage
	json.Unmarshal(r.raw["_meta"], &meta)
	r.setImpl(meta[protocol.MetaServerInfo])
	return r, nil
}

func (r *serverInfo) parseCaps() error {
	if c := r.raw["capabilities"]; len(c) > 0 && string(c) != "null" {
		if err := json.Unmarshal(c, &r.caps); err != nil {
			return fmt.Errorf("capabilities is not an object: %w", err)
		}
	}
	return nil
}

func (r *serverInfo) setImpl(raw json.RawMessage) {
	var info struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &info) == nil && len(raw) > 0 && raw[0] == '{' {
		r.implInfo, r.serverName = raw, info.Name
	}
}

// servesLegacy reports whether a modern server listed the legacy revision v
// in its supportedVersions: a dual-era server, which may serve a request
// enveloped as v in that revision, without an initialize of its own.
func (r *serverInfo) servesLegacy(v string) bool {
	return r != nil && r.era == eraModern && protocol.IsLegacy(v) && slices.Contains(r.versions, v)
}

// newestLegacy is the newest legacy revision a modern server listed in its
// supportedVersions; "" when it listed none.
func (r *serverInfo) newestLegacy() string {
	newest := ""
	if r == nil || r.era != eraModern {
		return newest
	}
	for _, v := range r.versions {
		if protocol.IsLegacy(v) && v > newest {
			newest = v
		}
	}
	return newest
}

func (r *serverInfo) has(capability string) bool {
	v, ok := r.caps[capability]
	return ok && string(v) != "null"
}

// hasPath reports whether a capability has a member, such as
// ("resources", "subscribe") or ("tasks", "cancel"), that is not false or null.
func (r *serverInfo) hasPath(capability, member string) bool {
	c, ok := r.caps[capability]
	if !ok {
		return false
	}
	s, ok := jsonrpc.FindPath(c, member)
	v := c[s.Start:s.End]
	return ok && string(v) != "null" && string(v) != "false"
}

// parseRemembered reads a description Memory kept: the result of the
// server's initialize (era "legacy") or server/discover ("modern").
func parseRemembered(era string, raw json.RawMessage) (*serverInfo, error) {
	switch era {
	case eraLegacy.String():
		return parseInitResult(raw)
	case eraModern.String():
		return parseDiscoverResult(raw)
	}
	return nil, fmt.Errorf("unknown era %q", era)
}

// same reports whether cur says of the server exactly what r did.
func (r *serverInfo) same(cur *serverInfo) bool {
	return r.era == cur.era && bytes.Equal(r.result, cur.result)
}

// incompatible says why sessions that negotiated against r cannot stay on a
// server that now answers cur; "" when they can.
func (r *serverInfo) incompatible(cur *serverInfo) string {
	if r.era != cur.era {
		return fmt.Sprintf("the %s protocol era instead of the %s one", cur.era, r.era)
	}
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

// negotiate picks the legacy version a session gets: its own if mcpmux
// knows it and the server serves it (a legacy server: its version or older;
// a modern one: any, through the bridge), else the newest the server serves
// (the client decides).
func (r *serverInfo) negotiate(requested string) string {
	newest := r.version
	if r.era == eraModern {
		newest = protocol.LatestLegacy // through the bridge, any
	}
	if protocol.IsLegacy(requested) && requested <= newest {
		return requested
	}
	return newest
}

// sessionCaps are the server's capabilities as mcpmux can promise them to
// a session: listChanged on every list the server has (mcpmux tells the
// sessions after a restart); no tasks.list (the server would list every
// session's tasks); and no tasks at all where the session's era differs
// from the server's (the two eras' tasks do not translate).
func (r *serverInfo) sessionCaps(sessionEra era) (json.RawMessage, error) {
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
	switch {
	case sessionEra != r.era:
		delete(caps, "tasks")
	case r.has("tasks"):
		var tasks map[string]json.RawMessage
		if json.Unmarshal(caps["tasks"], &tasks) == nil {
			delete(tasks, "list")
			caps["tasks"], _ = json.Marshal(tasks)
		}
	}
	return json.Marshal(caps)
}

// forSession is the InitializeResult a legacy session receives, with the
// version it negotiated.
func (r *serverInfo) forSession(version string) (json.RawMessage, error) {
	caps, err := r.sessionCaps(eraLegacy)
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(r.raw)+3)
	if r.era != eraModern {
		for k, v := range r.raw {
			out[k] = v
		}
	} else {
		if in, ok := r.raw["instructions"]; ok {
			out["instructions"] = in
		}
		out["serverInfo"] = r.impl()
	}
	out["protocolVersion"], _ = json.Marshal(version)
	out["capabilities"] = caps
	return json.Marshal(out)
}

// forDiscover is the DiscoverResult a modern session receives: every
// revision mcpmux serves, the server's capabilities as a modern session may
// use them, its instructions and its serverInfo.
func (r *serverInfo) forDiscover() (json.RawMessage, error) {
	caps, err := r.sessionCaps(eraModern)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{
		"resultType": json.RawMessage(`"complete"`),
		"ttlMs":      json.RawMessage(`0`),
		"cacheScope": json.RawMessage(`"private"`),
	}
	switch r.era {
	case eraModern:
		for k, v := range r.raw {
			out[k] = v
		}
	default:
		if in, ok := r.raw["instructions"]; ok {
			out["instructions"] = in
		}
		out["_meta"], _ = json.Marshal(map[string]json.RawMessage{protocol.MetaServerInfo: r.impl()})
	}
	out["supportedVersions"], _ = json.Marshal(protocol.Supported)
	out["capabilities"] = caps
	return json.Marshal(out)
}

// impl is the server's Implementation, or a stand-in naming mcpmux's view
// of it when the server gave none.
func (r *serverInfo) impl() json.RawMessage {
	if r.implInfo != nil {
		return r.implInfo
	}
	return json.RawMessage(`{"name":"unknown","version":""}`)
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
