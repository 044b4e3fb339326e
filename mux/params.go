package mux

import (
	"encoding/json"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// message is a message as the hub reads it: a session's request, or a
// notification or request of the server's, with a view of its params built
// once, when it comes in, in one pass over params and one over their
// _meta. The code that serves it reads the view, rather than look up each
// path again.
type message struct {
	*jsonrpc.Message
	p params
}

// The members of params, and of params._meta, the view finds: those of a
// session's request, then those of the server's messages.
const (
	pMeta = iota
	pTask
	pRequestState
	pInputResponses
	pProgressToken
	pRequestID
	pElicitationID
	pTaskID
	pURI
	pLevel
	pName
	nParams
)

const (
	mProgressToken = iota
	mProtocolVersion
	mClientInfo
	mClientCapabilities
	mLogLevel
	mSubscriptionID
	mRelatedTask
	nMeta
)

var (
	paramNames = []string{
		pMeta: "_meta", pTask: "task", pRequestState: "requestState", pInputResponses: "inputResponses",
		pProgressToken: "progressToken", pRequestID: "requestId", pElicitationID: "elicitationId", pTaskID: "taskId", pURI: "uri", pLevel: "level", pName: "name",
	}
	metaNames = []string{
		mProgressToken: "progressToken", mProtocolVersion: protocol.MetaProtocolVersion, mClientInfo: protocol.MetaClientInfo,
		mClientCapabilities: protocol.MetaClientCapabilities, mLogLevel: protocol.MetaLogLevel,
		mSubscriptionID: protocol.MetaSubscriptionID, mRelatedTask: relatedTask,
	}
)

// relatedTask is the _meta member that names the task a server's message
// is about.
const relatedTask = "io.modelcontextprotocol/related-task"

// params is where the members the hub reads sit in a request's frame.
type params struct {
	found, metaFound uint64 // bit i: paramNames[i], metaNames[i] is there
	at               [nParams]jsonrpc.Span
	metaAt           [nMeta]jsonrpc.Span
}

// viewOf reads m into a message.
func viewOf(m *jsonrpc.Message) message {
	r := message{Message: m}
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
	if !ok {
		return "", false
	}
	return jsonrpc.Unquote(frame[s.Start:s.End])
}

// metaString decodes the string at params._meta[metaNames[i]]; false when
// it is absent or not a string.
func (m *message) metaString(i int) (string, bool) {
	s, ok := m.p.inMeta(i)
	return stringIn(m.Frame, s, ok)
}

// metaRaw is the value at params._meta[metaNames[i]]; nil when absent.
func (m *message) metaRaw(i int) json.RawMessage {
	if s, ok := m.p.inMeta(i); ok {
		return json.RawMessage(m.Frame[s.Start:s.End])
	}
	return nil
}

// inputResponse is the span in the frame of params.inputResponses[key].
func (m *message) inputResponse(key string) (jsonrpc.Span, bool) {
	in, ok := m.p.param(pInputResponses)
	if !ok {
		return jsonrpc.Span{}, false
	}
	s, ok := jsonrpc.FindPath(m.Frame[in.Start:in.End], key)
	return jsonrpc.Span{Start: in.Start + s.Start, End: in.Start + s.End}, ok
}

// paramString decodes the string at params[paramNames[i]]; false when it
// is absent or not a string.
func (m *message) paramString(i int) (string, bool) {
	s, ok := m.p.param(i)
	return stringIn(m.Frame, s, ok)
}

// relatedTaskID is the task a server's message names in its _meta.
func (m *message) relatedTaskID() (string, bool) {
	rt, ok := m.p.inMeta(mRelatedTask)
	if !ok {
		return "", false
	}
	s, ok := jsonrpc.FindPath(m.Frame[rt.Start:rt.End], "taskId")
	return stringIn(m.Frame, jsonrpc.Span{Start: rt.Start + s.Start, End: rt.Start + s.End}, ok)
}
