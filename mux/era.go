package mux

import (
	"bytes"
	"encoding/json"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// The two MCP eras differ in how a server is opened (open.go), in what a
// session is answered (info.go) and sent (this file, mrtr.go, listen.go), and
// in nothing else: ids, tokens, cancellation, flow control and fan-out are
// the same router for both.

// era is the protocol era of a server process or of a session.
type era uint8

const (
	eraUnknown era = iota // a session that has not said yet
	eraLegacy             // 2024-11-05 to 2025-11-25: initialize, per-connection state
	eraModern             // 2026-07-28: a _meta envelope on every request
)

func (e era) String() string {
	switch e {
	case eraLegacy:
		return "legacy"
	case eraModern:
		return "modern"
	}
	return ""
}

// envelope is the _meta a modern request carries about its sender.
type envelope struct {
	version string
	info    json.RawMessage // clientInfo; nil when absent
	caps    json.RawMessage // clientCapabilities; nil when absent
	level   string          // logLevel; "" when absent
}

// metaSpan is the span of params._meta in the frame, when it is an object.
func metaSpan(m *jsonrpc.Message) (jsonrpc.Span, bool) {
	s, ok := m.ParamsPath("_meta")
	if !ok || m.Frame[s.Start] != '{' {
		return jsonrpc.Span{}, false
	}
	return s, true
}

// envelopeOf reads a request's envelope; false when it carries none (no
// protocol version in its _meta).
func envelopeOf(m *jsonrpc.Message) (envelope, bool) {
	s, ok := metaSpan(m)
	if !ok {
		return envelope{}, false
	}
	meta := m.Frame[s.Start:s.End]
	var e envelope
	if e.version, ok = jsonrpc.StringMember(meta, protocol.MetaProtocolVersion); !ok {
		return envelope{}, false
	}
	e.info = jsonrpc.Member(meta, protocol.MetaClientInfo)
	e.caps = jsonrpc.Member(meta, protocol.MetaClientCapabilities)
	e.level, _ = jsonrpc.StringMember(meta, protocol.MetaLogLevel)
	return e, true
}

// envelopeKeys are the members of a modern envelope that a legacy server
// must not see: the revision above all, for a dual-era server would serve
// that one request in the other era. The request's clientCapabilities stay:
// a legacy server ignores a _meta member it does not know, and one that
// reads it (the go-sdk's ClientCapabilities does, before its session's)
// learns what this very client can do, not the union mcpmux declared in its
// initialize, so it can refuse a tool with -32021 as a modern server would.
var envelopeKeys = []string{protocol.MetaProtocolVersion, protocol.MetaClientInfo, protocol.MetaLogLevel}

// stripEnvelope returns the edits that take the envelope keys out of a request's
// _meta, with the progress token, if any, replaced by token. ok is false when
// the request has no _meta object.
func stripEnvelope(m *jsonrpc.Message, token []byte) (jsonrpc.Edit, bool) {
	s, ok := metaSpan(m)
	if !ok {
		return jsonrpc.Edit{}, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m.Frame[s.Start:s.End], &meta) != nil {
		return jsonrpc.Edit{}, false
	}
	for _, k := range envelopeKeys {
		delete(meta, k)
	}
	if token != nil {
		if _, ok := meta["progressToken"]; ok {
			meta["progressToken"] = token
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return jsonrpc.Edit{}, false
	}
	return jsonrpc.Edit{Span: s, Value: b}, true
}

// injectEnvelope returns the edit that adds members to a request's _meta
// (creating _meta, and params, when absent). Members the request already
// has are left as they are.
func injectEnvelope(m *jsonrpc.Message, members map[string]json.RawMessage) jsonrpc.Edit {
	if s, ok := metaSpan(m); ok {
		meta := m.Frame[s.Start:s.End]
		have := func(k string) bool { _, ok := jsonrpc.FindPath(meta, k); return ok }
		return jsonrpc.InsertMembers(m.Frame, s, members, have)
	}
	meta := jsonrpc.ObjectOf(members, nil)
	if m.Params != nil && m.Params[0] == '{' {
		ps := jsonrpc.SpanOf(m.Frame, m.Params)
		return jsonrpc.InsertMembers(m.Frame, ps, map[string]json.RawMessage{"_meta": meta}, nil)
	}
	// No params: they go in before the frame's closing brace.
	end := bytes.LastIndexByte(m.Frame, '}')
	return jsonrpc.Edit{Span: jsonrpc.Span{Start: end, End: end}, Value: append([]byte(`,"params":{"_meta":`), append(meta, '}')...)}
}
