package streamable

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
	"github.com/mcpmux/mcpmux/session"
)

// The 2026-07-28 binding: no HTTP session. Each POST carries one request,
// which is served on a session of its own (its own ids and progress
// tokens in the router) that lives as long as the POST: the answer ends
// both, and a client that closes the response first has the request
// cancelled at the server by the session's end. A subscriptions/listen is
// a POST whose SSE response stays open until the client closes it.

// Headers of the 2026-07-28 binding.
const (
	headerMethod      = "Mcp-Method"
	headerName        = "Mcp-Name"
	headerParamPrefix = "Mcp-Param-"
)

// holdStatus bounds how long the status of a modern POST waits for the
// first message about its request before an SSE stream starts anyway.
const holdStatus = 500 * time.Millisecond

// isModernPOST classifies a POST as the SDKs do: anything on an
// Mcp-Session-Id is the 2025 binding; so is initialize, unless its
// MCP-Protocol-Version header names a revision past the legacy ones (then
// it is a 2026-07-28 request for a method that revision removed); and any
// other request is the 2026-07-28 binding when its header names such a
// revision or its _meta carries the modern envelope's protocol version.
func isModernPOST(r *http.Request, b *body) bool {
	if r.Header.Get(headerSessionID) != "" {
		return false
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && !protocol.IsLegacy(v) {
		return true
	}
	if b.batch || b.msg.Kind != jsonrpc.KindRequest || b.initialize() {
		return false
	}
	_, ok := b.msg.ParamsPath("_meta", protocol.MetaProtocolVersion)
	return ok
}

// headerRefusal is a 400 for a header that is missing or contradicts the
// body.
func headerRefusal(id json.RawMessage, msg string) *refusal {
	return &refusal{status: http.StatusBadRequest, id: id, err: &jsonrpc.Error{Code: protocol.CodeHeaderMismatch, Message: msg, Reason: jsonrpc.ReasonHeaderMismatch}}
}

// checkEnvelope checks a modern request's envelope against its
// MCP-Protocol-Version header, in the order the specification lists them.
func checkEnvelope(r *http.Request, m *jsonrpc.Message) *refusal {
	header := r.Header.Get(headerProtocolVersion)
	version, hasVersion := stringAt(m.Frame, m.ParamsPath, "_meta", protocol.MetaProtocolVersion)
	_, hasCaps := m.ParamsPath("_meta", protocol.MetaClientCapabilities)
	var missing []string
	if !hasVersion {
		missing = append(missing, protocol.MetaProtocolVersion)
	}
	if !hasCaps {
		missing = append(missing, protocol.MetaClientCapabilities)
	}
	switch {
	case header == "":
		return headerRefusal(m.ID, "the MCP-Protocol-Version header is required on a request of 2026-07-28")
	case len(missing) > 0:
		return &refusal{status: http.StatusBadRequest, id: m.ID, err: &jsonrpc.Error{
			Code: jsonrpc.CodeInvalidParams, Message: "the request's _meta lacks " + strings.Join(missing, " and "), Reason: jsonrpc.ReasonInvalidRequest,
		}}
	case header != version:
		return headerRefusal(m.ID, "the MCP-Protocol-Version header "+header+" does not match _meta "+protocol.MetaProtocolVersion+" "+version)
	case !protocol.IsModern(version):
		return &refusal{status: http.StatusBadRequest, id: m.ID, err: &jsonrpc.Error{
			Code: protocol.CodeUnsupportedVersion, Message: "unsupported protocol version " + version, Reason: jsonrpc.ReasonUnsupportedVersion,
			Extra: map[string]any{"supported": protocol.Supported, "requested": version},
		}}
	}
	return nil
}

// checkHeaders checks Mcp-Method, and Mcp-Name for the methods that name
// something, against the body.
func checkHeaders(r *http.Request, m *jsonrpc.Message) *refusal {
	switch got := r.Header.Get(headerMethod); {
	case got == "":
		return headerRefusal(m.ID, "the Mcp-Method header is required")
	case got != m.Method:
		return headerRefusal(m.ID, "the Mcp-Method header "+got+" does not match the body's method "+m.Method)
	}
	field := nameField(m.Method)
	if field == "" {
		return nil
	}
	raw := r.Header.Get(headerName)
	if raw == "" {
		return headerRefusal(m.ID, "the Mcp-Name header is required for "+m.Method)
	}
	got, ok := decodeHeader(raw)
	want, _ := stringAt(m.Frame, m.ParamsPath, field)
	switch {
	case !ok:
		return headerRefusal(m.ID, "the Mcp-Name header is not valid Base64")
	case got != want:
		return headerRefusal(m.ID, "the Mcp-Name header "+raw+" does not match the body's "+field+" "+want)
	}
	return nil
}

// nameField is the member of params that Mcp-Name repeats; "" when the
// method has none.
func nameField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	}
	return ""
}

// decodeHeader undoes the Base64 form of a header value, =?base64?…?=;
// false when it is that form and not valid Base64.
func decodeHeader(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	return string(b), err == nil
}

// stringAt decodes the string at path in a message's params (find is the
// message's ParamsPath); false when absent or not a string.
func stringAt(frame []byte, find func(...string) (jsonrpc.Span, bool), path ...string) (string, bool) {
	s, ok := find(path...)
	if !ok || frame[s.Start] != '"' {
		return "", false
	}
	return jsonrpc.Unquote(frame[s.Start:s.End])
}

// postModern serves a POST of the 2026-07-28 binding.
func (h *Handler) postModern(rw http.ResponseWriter, r *http.Request, server string, ep Endpoint, b *body) {
	if !Accepts(r, "application/json") && !Accepts(r, "text/event-stream") {
		h.refuse(rw, r, server, errNotAcceptable)
		return
	}
	var client string
	if !b.batch {
		client = clientOf(r, b.msg)
	}
	if f := h.checkModern(r, server, ep, b, client); f != nil {
		h.refuse(rw, r, server, f)
		return
	}
	if b.msg.Kind != jsonrpc.KindRequest {
		// Notifications have no session to go to: the binding's only one,
		// cancellation, is the closing of the request's response.
		rw.WriteHeader(http.StatusAccepted)
		return
	}
	if ep.Full() {
		h.refuse(rw, r, server, errFull)
		return
	}
	if !h.enterModern() {
		h.refuse(rw, r, server, errShuttingDown)
		return
	}
	defer h.active.Done()
	listen := b.msg.Method == "subscriptions/listen"
	var ended chan struct{} // closed when the client's newer listens end this one
	if listen {
		ended = make(chan struct{})
		release, ok := h.cfg.Streams.Acquire(listenClient(r, b.msg), func() { close(ended) })
		if !ok {
			h.refuse(rw, r, server, errTooManyStreams)
			return
		}
		defer release()
	}
	p := newReply(rw, r, h.cfg.WriteTimeout, b.msg.ID, listen)
	peer := session.Peer{Transport: "http", Addr: r.RemoteAddr, OneRequest: true, Client: client}
	max := oneShotMax
	if listen {
		max = listenMax
	}
	h.serveOne(ep, b.frame, p.put, peer, func(t *oneShot) { holdModern(r, p, t, ended) }, max)
	h.endModern(r, server, p, ended)
}

// listenClient is the client a listen is counted to: the peer's address
// without its port, and the name the client gives itself.
func listenClient(r *http.Request, m *jsonrpc.Message) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	name, _ := stringAt(m.Frame, m.ParamsPath, "_meta", protocol.MetaClientInfo, "name")
	return "peer " + host + " client " + strconv.Quote(name)
}

// clientOf is what a modern request repeats of its client, and so what
// ties its requests together (session.Peer.Client): the peer's host and
// the name and version in the request's clientInfo. The binding has no
// session and the TypeScript SDK's client sends no id of its own; the TCP
// connection is no key either, since a client may open several and one
// process's clients share them. Two clients that name themselves alike
// on one host are one client to it; "" when the request names none.
func clientOf(r *http.Request, m *jsonrpc.Message) string {
	name, _ := stringAt(m.Frame, m.ParamsPath, "_meta", protocol.MetaClientInfo, "name")
	if name == "" {
		return ""
	}
	version, _ := stringAt(m.Frame, m.ParamsPath, "_meta", protocol.MetaClientInfo, "version")
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	b := make([]byte, 0, 16+len(host)+len(name)+len(version)+8)
	b = append(append(append(b, "peer "...), host...), " client "...)
	b = append(strconv.AppendQuote(b, name), ' ')
	return string(strconv.AppendQuote(b, version))
}

// checkModern runs the binding's checks of a POST: one message, its
// envelope, its headers (client is clientOf the request).
func (h *Handler) checkModern(r *http.Request, server string, ep Endpoint, b *body, client string) *refusal {
	switch {
	case b.batch:
		return refused(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonBatchNotSupported, "2026-07-28 has no batches: send one request per POST")
	case b.msg.Kind != jsonrpc.KindRequest:
		return nil
	}
	if f := checkEnvelope(r, b.msg); f != nil {
		return f
	}
	if f := checkHeaders(r, b.msg); f != nil {
		return f
	}
	if b.msg.Method == "initialize" {
		return &refusal{status: http.StatusNotFound, id: b.msg.ID, err: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "initialize is not part of 2026-07-28: send the request itself, with its _meta envelope", Reason: jsonrpc.ReasonMethodNotFound}}
	}
	if b.msg.Method == "tools/call" {
		return h.tools.checkParams(h, r, server, ep, b.msg, client)
	}
	return nil
}

// enterModern counts a modern request in h.active; false once closing.
func (h *Handler) enterModern() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.active.Add(1)
	return true
}

// serveOne serves frame on a session of its own, on the caller's
// goroutine: hold, run once the request is handled, serves the POST
// (delivering what the session sends to put) until it is done, and its
// return ends the session. serveOne returns once the session has ended,
// after a last delivery of what it sent.
func (h *Handler) serveOne(ep Endpoint, frame []byte, put func(outbox.Frame), peer session.Peer, hold func(*oneShot), max int) {
	t := newOneShot(frame, put)
	t.max = max
	t.hold = func() { hold(t) }
	ep.Serve(h.ctx, t, peer)
	t.Close()
	t.deliver()
}

// holdModern holds a modern POST until its answer is complete, the client
// leaves, the session ends, or ended is closed (a listen the client's
// newer ones ended); meanwhile it delivers what the session sends, the
// status waits up to holdStatus for the first message, and an open SSE
// stream gets a keepalive now and then.
func holdModern(r *http.Request, p *reply, t *oneShot, ended <-chan struct{}) {
	timer := time.NewTimer(holdStatus)
	defer timer.Stop()
	held := true // the status is being held: the timer's first run ends that
	for {
		select {
		case <-t.wake:
			t.deliver()
		case <-p.finished:
			return
		case <-r.Context().Done():
			return // the client left: the session's end cancels the request
		case <-t.done:
			return
		case <-ended:
			return
		case <-timer.C:
			if held {
				p.start()
			} else {
				p.keepalive()
			}
			held = false
			timer.Reset(sseKeepalive)
		}
	}
}

// endModern ends a modern POST whose session has ended: a listen ended by
// the client's newer ones says so, and any other request not answered was
// cut short by mcpmux's shutdown.
func (h *Handler) endModern(r *http.Request, server string, p *reply, ended <-chan struct{}) {
	select {
	case <-p.finished:
		return
	case <-r.Context().Done():
		return
	default:
	}
	f := errShuttingDown
	select {
	case <-ended:
		f = errListenEnded
		h.log.Warn("ended a listen: "+f.err.Message, "peer", r.RemoteAddr, "server", Clip(server))
	default:
	}
	p.refuse(f.status, f.err.WithServer(server))
}

// errSessionless: GET and DELETE name an HTTP session of the 2025 binding;
// without one they have nothing to act on, and the 2026-07-28 binding has
// neither.
var errSessionless = refused(http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonNoSession, "only POST is served without Mcp-Session-Id: GET and DELETE need an HTTP session of the 2025 binding (from initialize), and 2026-07-28 has neither")

// refuseSessionless answers a request other than POST without a session
// id: 405, with the method allowed.
func (h *Handler) refuseSessionless(rw http.ResponseWriter, r *http.Request, server string) {
	rw.Header().Set("Allow", "POST")
	h.refuse(rw, r, server, errSessionless, "method", r.Method)
}
