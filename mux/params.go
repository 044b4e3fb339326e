package mux

import (
	"encoding/json"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// request is a session's request as the hub reads it: the message, and a
// view of its params built once, when it comes in, in one pass over params
// and one over their _meta. The code that serves the request reads the
// view, rather than look up each path again.
type request struct {
	*jsonrpc.Message
	p params
}

// The members of params, and of params._meta, the view finds.
const (
	pMeta = iota
	pTask
	pRequestState
	pInputResponses
	nParams
)

const (
	mProgressToken = iota
	mProtocolVersion
	mClientInfo
	mClientCapabilities
	mLogLevel
	nMeta
)

var (
	paramNames = []string{pMeta: "_meta", pTask: "task", pRequestState: "requestState", pInputResponses: "inputResponses"}
	metaNames  = []string{
		mProgressToken: "progressToken", mProtocolVersion: protocol.MetaProtocolVersion, mClientInfo: protocol.MetaClientInfo,
		mClientCapabilities: protocol.MetaClientCapabilities, mLogLevel: protocol.MetaLogLevel,
	}
)

// params is where the members the hub reads sit in a request's frame.
type params struct {
	found, metaFound uint64 // bit i: paramNames[i], metaNames[i] is there
	at               [nParams]jsonrpc.Span
	metaAt           [nMeta]jsonrpc.Span
}

func newRequest(m *jsonrpc.Message) request {
	r := request{Message: m}
	if len(m.Params) == 0 {
		return r
	}
	p := &r.p
	p.found = jsonrpc.FindMembers(m.Params, paramNames, p.at[:])
	off := jsonrpc.SpanOf(m.Frame, m.Params).Start
	for i := range p.at {
		p.at[i].Start += off
		p.at[i].End += off
	}
	if meta, ok := p.meta(m.Frame); ok {
		p.metaFound = jsonrpc.FindMembers(m.Frame[meta.Start:meta.End], metaNames, p.metaAt[:])
		for i := range p.metaAt {
			p.metaAt[i].Start += meta.Start
			p.metaAt[i].End += meta.Start
		}
	}
	return r
}

// param is the span in the frame of params[paramNames[i]].
func (p *params) param(i int) (jsonrpc.Span, bool) {
	return p.at[i], p.found&(1<<i) != 0
}

// inMeta is the span in the frame of params._meta[metaNames[i]].
func (p *params) inMeta(i int) (jsonrpc.Span, bool) {
	return p.metaAt[i], p.metaFound&(1<<i) != 0
}

// meta is the span of params._meta, when it is an object.
func (p *params) meta(frame []byte) (jsonrpc.Span, bool) {
	s, ok := p.param(pMeta)
	if !ok || frame[s.Start] != '{' {
		return jsonrpc.Span{}, false
	}
	return s, true
}

// stringIn decodes the JSON string at span s of frame, if ok; false when
// it is not one.
func stringIn(frame []byte, s jsonrpc.Span, ok bool) (string, bool) {
	var v string
	if !ok || frame[s.Start] != '"' || json.Unmarshal(frame[s.Start:s.End], &v) != nil {
		return "", false
	}
	return v, true
}

// metaString decodes the string at params._meta[metaNames[i]]; false when
// it is absent or not a string.
func (m *request) metaString(i int) (string, bool) {
	s, ok := m.p.inMeta(i)
	return stringIn(m.Frame, s, ok)
}

// metaRaw is the value at params._meta[metaNames[i]]; nil when absent.
func (m *request) metaRaw(i int) json.RawMessage {
	if s, ok := m.p.inMeta(i); ok {
		return json.RawMessage(m.Frame[s.Start:s.End])
	}
	return nil
}

// inputResponse is the span in the frame of params.inputResponses[key].
func (m *request) inputResponse(key string) (jsonrpc.Span, bool) {
	in, ok := m.p.param(pInputResponses)
	if !ok {
		return jsonrpc.Span{}, false
	}
	s, ok := jsonrpc.FindPath(m.Frame[in.Start:in.End], key)
	return jsonrpc.Span{Start: in.Start + s.Start, End: in.Start + s.End}, ok
}
