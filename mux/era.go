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

// metaSpan is the span of params._meta in the frame, when it is an object
// (a request's is in its view: request.p.meta).
func metaSpan(m *jsonrpc.Message) (jsonrpc.Span, bool) {
	s, ok := m.ParamsPath("_meta")
	if !ok || m.Frame[s.Start] != '{' {
		return jsonrpc.Span{}, false
	}
	return s, true
}

// envelopeOf reads a request's envelope; false when it carries none (no
// protocol version in its _meta).
func envelopeOf(m *message) (envelope, bool) {
	var e envelope
	var ok bool
	if s, found := m.p.inMeta(mProtocolVersion); found && string(m.Frame[s.Start:s.End]) == `"`+protocol.Modern+`"` {
		e.version = protocol.Modern // the common case, without a copy
	} else if e.version, ok = m.metaString(mProtocolVersion); !ok {
		return envelope{}, false
	}
	e.info = m.metaRaw(mClientInfo)
	e.caps = m.metaRaw(mClientCapabilities)
	e.level, _ = m.metaString(mLogLevel)
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

// stripEnvelope appends to edits those that take the envelope keys out of
// a request's _meta (at s: its span, zero when it has no _meta object).
func stripEnvelope(m *jsonrpc.Message, s jsonrpc.Span, edits []jsonrpc.Edit) []jsonrpc.Edit {
	if s.End == 0 {
		return edits
	}
	return jsonrpc.DropMembers(m.Frame, s, envelopeKeys, edits)
}

// injectEnvelope returns the edit that adds members to a message's _meta
// (at s: its span, zero when it has no _meta object), creating _meta, and
// params, when absent. Members it already has are left as they are.
func injectEnvelope(m *jsonrpc.Message, s jsonrpc.Span, members map[string]json.RawMessage) jsonrpc.Edit {
	if s.End != 0 {
		meta := m.Frame[s.Start:s.End]
		have := func(k string) bool { _, ok := jsonrpc.FindPath(meta, k); return ok }
		return jsonrpc.InsertMembers(m.Frame, s, members, have)
	}
	return metaEdit(m, jsonrpc.ObjectOf(members, nil))
}

// metaEdit returns the edit that gives a message with no _meta the object
// meta as its _meta, first in its params, creating them when absent. The
// edit holds a copy of meta.
func metaEdit(m *jsonrpc.Message, meta []byte) jsonrpc.Edit {
	const key, params = `"_meta":`, `,"params":{"_meta":`
	if m.Params != nil && m.Params[0] == '{' {
		at := jsonrpc.SpanOf(m.Frame, m.Params).Start + 1
		v := append(append(make([]byte, 0, len(key)+len(meta)+1), key...), meta...)
		if !jsonrpc.EmptyObject(m.Params) {
			v = append(v, ',')
		}
		return jsonrpc.Edit{Span: jsonrpc.Span{Start: at, End: at}, Value: v}
	}
	// No params: they go in before the frame's closing brace.
	end := bytes.LastIndexByte(m.Frame, '}')
	v := append(append(make([]byte, 0, len(params)+len(meta)+1), params...), meta...)
	return jsonrpc.Edit{Span: jsonrpc.Span{Start: end, End: end}, Value: append(v, '}')}
}
