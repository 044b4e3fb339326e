package mux

import (
	"encoding/json"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// Sessions of the modern era (2026-07-28): no handshake; every request
// carries its sender's envelope, which is forwarded as it is to a modern
// server and taken out for a legacy one.

// modernReq is what a modern session's request declared in its envelope.
type modernReq struct {
	caps  caps
	tasks bool // the tasks extension
	// Its method and params, kept for the requestBind of a requestState
	// mcpmux gives it (mrtr.go), computed only then.
	method string
	params json.RawMessage
}

// tasksExtension is the name of the tasks extension of the modern revision.
const tasksExtension = "io.modelcontextprotocol/tasks"

// removedMethods are the legacy methods the modern revision has no more; a
// modern session asking for one gets -32601, as from a modern server, and
// the server (which may serve both eras) never sees it.
var removedMethods = map[string]bool{
	"logging/setLevel": true, "resources/subscribe": true, "resources/unsubscribe": true,
	"tasks/result": true, "tasks/list": true, "ping": true,
}

// handleDiscover answers server/discover from the cached description of the
// server, in whichever era the server speaks. It decides nothing about the
// session's era: a client that probes may still initialize.
func (c *client) handleDiscover(m *jsonrpc.Message, out sink) {
	info, err := c.description()
	if err != nil {
		c.failWith(out, m.ID, err)
		return
	}
	body, err := info.forDiscover()
	if err != nil {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot build the discover result: " + err.Error(), Reason: jsonrpc.ReasonInternal})
		return
	}
	out.reply(jsonrpc.Response(m.ID, body))
}

// handleModern serves a request of a modern session.
func (c *client) handleModern(m *message, env envelope, enveloped bool, out sink) {
	mr, e := checkEnvelope(env, enveloped)
	if e != nil {
		c.fail(out, m.ID, e)
		return
	}
	switch {
	case m.Method == "subscriptions/listen":
		c.listen(m, mr, out)
		return
	case removedMethods[m.Method]:
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: m.Method + " is not part of 2026-07-28", Reason: jsonrpc.ReasonMethodNotFound})
		return
	case m.Method == "tasks/get" || m.Method == "tasks/update" || m.Method == "tasks/cancel":
		if !c.ownsTask(m) {
			c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such task in this session", Reason: jsonrpc.ReasonUnknownTask})
			return
		}
	}
	next, handled := c.modernRoots(m, mr, out)
	if handled {
		return // asked for its roots, or refused a retry without them
	}
	c.forwardModern(next, env, mr, out)
}

// forwardModern forwards a modern session's request, or answers a retry
// from the bridge.
func (c *client) forwardModern(m *message, env envelope, mr *modernReq, out sink) {
	if c.h.down.retry(c, m, out) {
		return // a retry with an input mcpmux asked for: answered from the bridge
	}
	if inputMethod(m.Method) {
		// The session's reader gave the frame to this request alone: its
		// params stay as they are while the request lives.
		mr.method, mr.params = m.Method, m.Params
	}
	// A legacy server has one level for everyone: the most verbose any
	// session wants, a modern session's latest request counting as its wish.
	if _, known := logRanks[env.level]; known && c.h.levels.set(c.sess.ID(), env.level) {
		if info := c.h.describedServer(); info != nil && info.era != eraModern {
			c.h.setLevelBefore(c)
		}
	}
	c.forward(m, out, fwd{modern: mr, level: env.level})
}

// checkEnvelope validates a modern request's envelope as a modern server
// must: its revision one mcpmux speaks, its capabilities declared.
func checkEnvelope(env envelope, enveloped bool) (*modernReq, *jsonrpc.Error) {
	switch {
	case !enveloped:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the request has no _meta envelope: " + protocol.MetaProtocolVersion + " is required in 2026-07-28", Reason: jsonrpc.ReasonInvalidRequest}
	case !protocol.IsModern(env.version):
		return nil, &jsonrpc.Error{Code: protocol.CodeUnsupportedVersion, Message: "unsupported protocol version " + env.version, Reason: jsonrpc.ReasonUnsupportedVersion, Extra: map[string]any{"supported": []string{protocol.Modern}, "requested": env.version}}
	case env.caps == nil || env.caps[0] != '{':
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the request's _meta envelope has no " + protocol.MetaClientCapabilities + " object", Reason: jsonrpc.ReasonInvalidRequest}
	}
	_, tasks := jsonrpc.FindPath(env.caps, "extensions", tasksExtension)
	return &modernReq{caps: parseCaps(env.caps), tasks: tasks}, nil
}

// envelopeMembers is the envelope mcpmux puts on a legacy session's
// requests to a modern server: the session as itself, from its initialize,
// in its own revision when the server listed that one in its
// supportedVersions (a dual-era server such as mcp-go's then serves the
// request in that revision, and its tools may send the session sampling
// and elicitation requests, which a 2026-07-28 request forbids them), else
// in 2026-07-28.
// encodedEnvelope is a session's envelope as a JSON object, and the
// server description and log level it was made with: the rest (the
// session's initialize) does not change.
type encodedEnvelope struct {
	server  *serverInfo
	level   string
	leveled bool
	obj     []byte // never written to once stored
}

// envelopeObject is envelopeMembers as a JSON object, encoded once per
// server description and log level rather than for each request.
func (c *client) envelopeObject() []byte {
	server := c.h.describedServer()
	level, leveled := c.h.levels.explicit(c.sess.ID())
	if e := c.envelope.Load(); e != nil && e.server == server && e.level == level && e.leveled == leveled {
		return e.obj
	}
	obj := jsonrpc.ObjectOf(c.envelopeMembers(), nil)
	c.envelope.Store(&encodedEnvelope{server: server, level: level, leveled: leveled, obj: obj})
	return obj
}

func (c *client) envelopeMembers() map[string]json.RawMessage {
	info, caps := c.handshake()
	version, _ := c.identity()
	if !c.h.describedServer().servesLegacy(version) {
		version = protocol.Modern
	}
	out := map[string]json.RawMessage{protocol.MetaProtocolVersion: json.RawMessage(`"` + version + `"`)}
	if len(info) > 0 && info[0] == '{' {
		out[protocol.MetaClientInfo] = info
	}
	if len(caps) > 0 && caps[0] == '{' {
		out[protocol.MetaClientCapabilities] = caps
	} else {
		out[protocol.MetaClientCapabilities] = json.RawMessage(`{}`)
	}
	if level, ok := c.h.levels.explicit(c.sess.ID()); ok {
		out[protocol.MetaLogLevel], _ = json.Marshal(level)
	}
	return out
}
