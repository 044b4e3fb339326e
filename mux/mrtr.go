package mux

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
)

// Input a server needs in the middle of a request, across the eras. A
// legacy server asks its client with a request of its own
// (elicitation/create, sampling/createMessage, roots/list); a modern one
// answers the request with an input_required result and is asked again
// with the input (MRTR). mcpmux turns one into the other:
//
//   - down (a modern session, a legacy server): the server's request
//     completes the session's request that caused it with an input_required
//     result, and the upstream request waits, parked, for the session's
//     retry, which carries the input; the server's request is answered with
//     it and the upstream answer goes to the retry. The retry names the
//     parked request by requestState, a token only mcpmux can make, bound to
//     the session and used once;
//   - up (a legacy session, a modern server): each input request of the
//     result is put to the session as a server request, and once it has
//     answered them all the request goes upstream again under a new id with
//     the input, round after round, up to maxRounds.

// maxRounds bounds the input rounds of one legacy request to a modern server.
const maxRounds = 8

// stateVersion starts every requestState mcpmux makes.
const stateVersion = "mcpmux1."

// inputMethod reports a method whose answer may be an input_required result.
func inputMethod(method string) bool {
	switch method {
	case "tools/call", "prompts/get", "resources/read":
		return true
	}
	return false
}

// parkedInput is an upstream request of a modern session waiting, on a
// legacy server, for the session's retry with the input the server asked
// for.
type parkedInput struct {
	session  uint64           // its owner: the session, or sessionless
	detached bool             // it outlives the session that caused it (see parkedOwner)
	up       int64            // the upstream request, kept in flight
	route    idmap.Route      // its route, under its placeholder id
	inputs   []askedInput     // the server's requests it waits on, one round
	timer    *time.Timer      // its wait for the retry; under flights.mu
	final    *jsonrpc.Message // the upstream answer, if it came before the retry
	failed   *jsonrpc.Error   // why the upstream request ended, if it did
	bind     requestBind      // the method and arguments its retry must carry
}

// requestBind is a digest of a request's method and its params without
// what a retry adds or changes (_meta, requestState, inputResponses): a
// requestState is good only for a retry of the request it was given to.
type requestBind [sha256.Size]byte

// retryMembers are the members of params a retry may add or change.
var retryMembers = []string{"_meta", "requestState", "inputResponses"}

// bindOf is the requestBind of a request. Its params are made canonical
// (members sorted, numbers as written, no spaces), so that the same
// arguments sent again with other spacing or member order bind the same.
func bindOf(method string, params json.RawMessage) requestBind {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	var members map[string]json.RawMessage
	if json.Unmarshal(params, &members) == nil && members != nil {
		for _, k := range retryMembers {
			delete(members, k)
		}
		h.Write(canonicalJSON(members))
	} else {
		h.Write(params) // not an object: bound as it is
	}
	return requestBind(h.Sum(nil))
}

// canonicalJSON is v encoded with sorted members and its numbers as
// written; nil when it cannot be (then only the method binds).
func canonicalJSON(members map[string]json.RawMessage) []byte {
	d := json.NewDecoder(bytes.NewReader(mustMarshal(members)))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return nil
	}
	return b.Bytes()
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// stateKey signs the requestState that names a parked request (the
// parked requests themselves are in flights, by nonce).
type stateKey []byte

func newStateKey() stateKey {
	key := make([]byte, 32)
	rand.Read(key)
	return key
}

// sign is the requestState naming nonce for session.
func (k stateKey) sign(session uint64, nonce []byte) string {
	mac := hmac.New(sha256.New, k)
	mac.Write(strconv.AppendUint(nil, session, 10))
	mac.Write([]byte{0})
	mac.Write(nonce)
	return stateVersion + base64.RawURLEncoding.EncodeToString(append(nonce, mac.Sum(nil)[:16]...))
}

// errBadState: a requestState mcpmux did not make for this session, or one
// already used.
var errBadState = errors.New("mux: requestState is not one this session was given, or was used already")

// errOtherRequest: a requestState retried with another method or other
// arguments than the request it was given to. The parked request still
// waits for its own retry.
var errOtherRequest = errors.New("mux: requestState was given to a request with another method or other arguments")

// verify checks a requestState against the session retrying with it and
// returns its nonce.
func (k stateKey) verify(session uint64, state string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(state, stateVersion))
	if !strings.HasPrefix(state, stateVersion) || err != nil || len(raw) != 8+16 {
		return "", errBadState
	}
	if !hmac.Equal([]byte(k.sign(session, raw[:8])), []byte(state)) {
		return "", errBadState
	}
	return string(raw[:8]), nil
}

// parkedID is the placeholder id a parked request is kept under: bytes that
// are not JSON, so no id a session sends can be equal to it.
func parkedID(up int64) json.RawMessage {
	return json.RawMessage("\x00parked-" + strconv.FormatInt(up, 10))
}

func isParkedID(id json.RawMessage) bool { return len(id) > 0 && id[0] == 0 }

// gatherWindow is how long mcpmux waits, after a legacy server's first
// request for input during a modern request, for the rest of its round
// before it answers that request input_required. MRTR puts every input of
// one round in one result, and a server of both eras opened legacy (the
// go-sdk) sends the input requests of one round at once, each from a
// goroutine of its own: three of them reached a call already answered
// before mcpmux waited. A round with one input waits the window too; it
// waits on a person anyway.
const gatherWindow = 25 * time.Millisecond

// askedInput is one of a legacy server's requests for input, put to a
// modern session as an entry of inputRequests.
type askedInput struct {
	asked  json.RawMessage // the id of the server's request, to answer
	method string          // its method
	key    string          // its key in inputRequests
	params json.RawMessage // its params, as the server sent them
}

// gathering is a round of input requests of one upstream request, waiting
// for the rest of its round (gatherWindow).
type gathering struct {
	c      *client
	r      idmap.Route
	inputs []askedInput
}

// askModern adds a legacy server's request for input to the round of the
// modern request that caused it; the first of a round starts the wait for
// the others, after which the round completes the request with one
// input_required result and parks the upstream request for the retry.
func (b *downBridge) askModern(proc process, c *client, up int64, r idmap.Route, m *jsonrpc.Message) {
	h := b.h
	if !inputMethod(r.Method) {
		proc.Send(noClientAnswer(h.cfg.Name, m.Method, m.ID, jsonrpc.ReasonNoClient, r.Method+" cannot carry an input request to a 2026-07-28 session"))
		return
	}
	if b.gather(c, up, r, m) {
		time.AfterFunc(gatherWindow, func() { b.flushRound(up) })
	}
}

// gather files a server's input request in the round of up; true when it
// is the first of its round.
func (b *downBridge) gather(c *client, up int64, r idmap.Route, m *jsonrpc.Message) (first bool) {
	params := m.Params
	if params == nil {
		params = json.RawMessage(`{}`)
	}
	in := askedInput{asked: bytes.Clone(m.ID), method: m.Method, params: bytes.Clone(params)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.rounds[up]; g != nil {
		in.key = "mcpmux-" + strconv.FormatInt(up, 10) + "-" + strconv.Itoa(len(g.inputs))
		g.inputs = append(g.inputs, in)
		return false
	}
	if b.rounds == nil {
		b.rounds = make(map[int64]*gathering)
	}
	in.key = "mcpmux-" + strconv.FormatInt(up, 10)
	b.rounds[up] = &gathering{c: c, r: r, inputs: []askedInput{in}}
	return true
}

// takeRound takes the round of up gathered so far.
func (b *downBridge) takeRound(up int64) *gathering {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.rounds[up]
	delete(b.rounds, up)
	return g
}

// flushRound ends the wait for the round of up: the request that caused it
// is answered input_required with every input, and parked.
func (b *downBridge) flushRound(up int64) {
	h := b.h
	g := b.takeRound(up)
	proc := h.life.current()
	if g == nil || proc == nil {
		return
	}
	c, r := g.c, g.r
	owner, detached := parkedOwner(c)
	parked := r
	parked.Session, parked.ID = owner, parkedID(up)
	p := &parkedInput{session: owner, detached: detached, up: up, route: parked, inputs: g.inputs}
	if d := dataOf(r); d != nil && d.modern != nil {
		p.bind = bindOf(d.modern.method, d.modern.params)
	}
	nonce := make([]byte, 8)
	rand.Read(nonce)
	found, next := h.flights.park(p, r.Token, string(nonce), h.cfg.ServerRequestTimeout, b.parkedTimeout)
	if !found {
		b.answerInputs(proc, p, jsonrpc.ReasonClientGone, "the request that caused it has ended")
		return
	}
	requests := make(map[string]any, len(p.inputs))
	for _, in := range p.inputs {
		requests[in.key] = map[string]any{"method": in.method, "params": in.params}
	}
	body, _ := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": requests, "requestState": b.states.sign(owner, nonce)})
	c.sess.Logger().Debug("asked a modern session for input", "inputs", len(p.inputs), "for", r.Method)
	// Parked, it causes nothing until its input comes, and it may never
	// come: the turn went on to the next request (next), and the retry
	// takes it again before the input reaches the server.
	h.release(next)
	c.sess.Send(outbox.Frame{Data: jsonrpc.Response(r.ID, body), Tag: r.Tag, Last: true})
	if detached {
		c.sess.End() // answered, as far as this session goes: the retry's session takes the request up
	}
}

// answerInputs answers each of the server's requests a parked request
// waits on as unanswered, for reason.
func (b *downBridge) answerInputs(proc process, p *parkedInput, reason, why string) {
	for _, in := range p.inputs {
		proc.Send(noClientAnswer(b.h.cfg.Name, in.method, in.asked, reason, why))
	}
}

// sessionless owns the parked requests of sessions that carry one request
// each (the 2026-07-28 HTTP binding), whose retries come on sessions of
// their own.
const sessionless = ^uint64(0)

// parkedOwner is who a session's parked requests belong to, and whether
// they outlive it: the session itself, or, for a session of one request,
// every such session of the hub (a retry proves itself by its signed
// requestState, whichever session it comes on).
func parkedOwner(c *client) (owner uint64, detached bool) {
	if c.sess.Peer().OneRequest {
		return sessionless, true
	}
	return c.sess.ID(), false
}

// retry serves a modern session's retry of a request mcpmux parked;
// false when m is not one (it names no requestState, or the server is
// modern and the state is the server's).
func (b *downBridge) retry(c *client, m *message, out sink) bool {
	h := b.h
	s, ok := m.p.param(pRequestState)
	state, ok := stringIn(m.Frame, s, ok)
	if !ok || !strings.HasPrefix(state, stateVersion) {
		return false // none, or the server's own
	}
	owner, detached := parkedOwner(c)
	nonce, err := b.states.verify(owner, state)
	var token json.RawMessage
	if s, ok := m.p.inMeta(mProgressToken); ok {
		token = m.Frame[s.Start:s.End]
	}
	var p *parkedInput
	found := false
	if err == nil {
		if detached {
			c.sess.Begin() // the request is this session's from now on
		}
		p, found, err = h.flights.resume(owner, nonce, bindOf(m.Method, m.Params), c.sess.ID(), m.ID, token, out.tag())
		if err != nil && detached {
			c.sess.End()
		}
	}
	switch {
	case errors.Is(err, errOtherRequest):
		c.sess.Logger().Warn("refused a retry whose method or arguments are not those of the request its requestState was given to", "id", string(m.ID), "method", m.Method)
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState was given to a request with another method or other arguments; retry with the same ones", Reason: jsonrpc.ReasonInvalidRequestState})
		return true
	case p == nil:
		c.sess.Logger().Warn("refused a retry with a requestState this session was not given", "id", string(m.ID))
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState is not one this session was given, or it was used already", Reason: jsonrpc.ReasonInvalidRequestState})
		return true
	case err != nil:
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "request id " + string(m.ID) + " is already in flight on this session", Reason: jsonrpc.ReasonDuplicateID})
		b.abandonParked(p)
		return true
	case !found:
		b.answerEnded(c, p, m.ID, out.tag())
		return true
	}
	b.giveInput(c, p, m)
	return true
}

// giveInput answers the server's parked request with what the retry
// carries for it. Under the turn the answer waits for it, as the request
// did at first: once answered, the server may go on to ask for more, which
// must reach this retry.
func (b *downBridge) giveInput(c *client, p *parkedInput, m *message) {
	h := b.h
	// One answer to each request the server asked: they go up together,
	// under one turn.
	var frames [][]byte
	for _, in := range p.inputs {
		if s, ok := m.inputResponse(in.key); ok {
			frames = append(frames, jsonrpc.Response(in.asked, m.Frame[s.Start:s.End]))
		} else {
			frames = append(frames, noClientAnswer(h.cfg.Name, in.method, in.asked, jsonrpc.ReasonNoClient, "the session retried without an answer to "+in.method))
		}
	}
	q := queued{session: c.sess.ID(), up: p.up, frame: frames[0], more: frames[1:], input: true}
	d := h.flights.data(p.up)
	q.d = d
	if d != nil && d.serial && !h.flights.admitInput(q) {
		return // sent when the turn comes (release), or ended meanwhile
	}
	if proc := h.life.current(); proc != nil && q.send(proc) == nil {
		h.flights.sent(p.up, d)
	}
}

// answerEnded answers a retry whose upstream request ended while it was
// parked: with its answer, or its failure.
func (b *downBridge) answerEnded(c *client, p *parkedInput, id json.RawMessage, tag uint64) {
	h := b.h
	r := idmap.Route{Session: c.sess.ID(), ID: id, Method: p.route.Method, Tag: tag, Started: time.Now()}
	switch {
	case p.final != nil:
		c.deliver(r, b.shapeDown(h.view.load().filterAnswer(r.Method, p.final), id, r.Method, false), nil)
	case p.failed != nil:
		c.deliver(r, p.failed.WithServer(h.cfg.Name).Response(id), nil)
	default:
		c.deliver(r, (&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request ended while it waited for input", Reason: jsonrpc.ReasonUpstreamExited}).WithServer(h.cfg.Name).Response(id), nil)
	}
}

// abandonParked gives up on a parked request: the server's request is
// answered as unanswered, and its request is cancelled.
func (b *downBridge) abandonParked(p *parkedInput) {
	h := b.h
	proc := h.life.current()
	if proc != nil {
		b.answerInputs(proc, p, jsonrpc.ReasonClientTimeout, "the session did not retry with the input the server asked for")
	}
	r, inFlight := h.flights.take(p.up)
	if inFlight && proc != nil {
		proc.Send(cancelFrame(p.up, "no retry came with the input"))
	}
	if !inFlight {
		r = p.route // answered while parked: only its session's count is left
	}
	if c := h.sessions.get(r.Session); c != nil {
		c.settle(r)
	} else {
		h.settle(dataOf(r))
	}
}

func (b *downBridge) parkedTimeout(nonce string) {
	h := b.h
	if p := h.flights.expireParked(nonce); p != nil {
		b.abandonParked(p)
	}
}

// dropParked abandons a departed session's parked requests (their upstream
// requests are cancelled with the session's others).
func (b *downBridge) dropParked(parked []*parkedInput) {
	h := b.h
	proc := h.life.current()
	for _, p := range parked {
		if proc != nil {
			b.answerInputs(proc, p, jsonrpc.ReasonClientGone, "the session that was asked has gone")
		}
	}
}

// rootsFromCause puts a legacy server's roots/list, when mcpmux has no
// roots of its own to answer with, to the modern request that holds the
// turn (exactly its cause) as an input request, if that request declared
// roots in its envelope, and refuses it with -32021 if not; false when no
// modern request holds the turn (the server gets -32601, as before).
func (b *downBridge) rootsFromCause(proc process, m *jsonrpc.Message) bool {
	h := b.h
	busy, _ := h.flights.holder()
	if busy == 0 {
		return false
	}
	r, ok := h.flights.get(busy)
	d := dataOf(r)
	if !ok || d == nil || d.modern == nil || d.isListen() || isParkedID(r.ID) {
		return false
	}
	c := h.sessions.get(r.Session)
	if c == nil {
		return false
	}
	n := need{roots: true}
	if !d.modern.caps.meets(n) {
		h.refuseUndeclared(proc, busy, r, m, n)
		return true
	}
	b.askModern(proc, c, busy, r, m)
	return true
}

// cacheable are the methods whose modern results carry cache hints.
var cacheable = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// asksForInput: a result carries input requests (a non-empty inputRequests
// object).
func asksForInput(result json.RawMessage) bool {
	in := jsonrpc.Member(result, "inputRequests")
	return len(in) > 1 && in[0] == '{' && !jsonrpc.EmptyObject(in)
}

// Members a legacy result gets for a modern session, as ObjectOf would
// write them (sorted), for completeEdit.
var (
	shapeNames    = []string{"resultType", "ttlMs", "cacheScope", "inputRequests"}
	shapeComplete = []byte(`"resultType":"complete"`)
	shapeList     = []byte(`"cacheScope":"private","resultType":"complete","ttlMs":0`)
	// The same, followed by the result's own members.
	shapeCompleteThen = []byte(`"resultType":"complete",`)
	shapeListThen     = []byte(`"cacheScope":"private","resultType":"complete","ttlMs":0,`)
)

// completeEdit is shapeDown's edit of a result in the common case, without
// a map: a result that asks for no input and has none of the members to
// add gets them written in at its start. false when it is not that case.
func completeEdit(m *jsonrpc.Message, method string) (jsonrpc.Edit, bool) {
	var at [4]jsonrpc.Span
	if jsonrpc.FindMembers(m.Result, shapeNames, at[:]) != 0 {
		return jsonrpc.Edit{}, false // shapeDown's general case sorts it out
	}
	empty := jsonrpc.EmptyObject(m.Result)
	var v []byte
	switch list := cacheable[method]; {
	case list && empty:
		v = shapeList
	case list:
		v = shapeListThen
	case empty:
		v = shapeComplete
	default:
		v = shapeCompleteThen
	}
	rs := jsonrpc.SpanOf(m.Frame, m.Result)
	return jsonrpc.Edit{Span: jsonrpc.Span{Start: rs.Start + 1, End: rs.Start + 1}, Value: v}, true
}

// shapeDown is a legacy server's answer as a modern session gets it, under
// id: a result says it is complete, or that it needs input when it asks
// for some (and how long it may be cached, for the
// lists), and the retired resource-not-found code becomes -32602. own: the
// caller owns m's frame and lets it be edited in place (SpliceHead), so
// that a large answer is not copied whole; else it is copied.
func (b *downBridge) shapeDown(m *jsonrpc.Message, id json.RawMessage, method string, own bool) []byte {
	idSpan, _ := m.IDSpan()
	var buf [2]jsonrpc.Edit // Splice keeps no edit: they stay on the stack
	edits := append(buf[:0], jsonrpc.Edit{Span: idSpan, Value: id})
	switch m.Kind {
	case jsonrpc.KindResult:
		if len(m.Result) == 0 || m.Result[0] != '{' {
			break
		}
		if e, ok := completeEdit(m, method); ok {
			edits = append(edits, e)
			break
		}
		add := map[string]json.RawMessage{"resultType": json.RawMessage(`"complete"`)}
		if inputMethod(method) && asksForInput(m.Result) {
			// A server of both eras opened legacy may still answer a later
			// round with input requests of its own (the go-sdk does, once it
			// has fulfilled the first round by requests): they are what it
			// says, and the retry, with its own requestState, goes to it.
			add["resultType"] = json.RawMessage(`"input_required"`)
		} else if cacheable[method] {
			add["ttlMs"], add["cacheScope"] = json.RawMessage(`0`), json.RawMessage(`"private"`)
		}
		have := func(k string) bool { _, ok := jsonrpc.FindPath(m.Result, k); return ok }
		edits = append(edits, jsonrpc.InsertMembers(m.Frame, jsonrpc.SpanOf(m.Frame, m.Result), add, have))
	case jsonrpc.KindError:
		if s, ok := jsonrpc.FindPath(m.Error, "code"); ok && string(m.Error[s.Start:s.End]) == strconv.Itoa(protocol.CodeLegacyResourceMissing) {
			es := jsonrpc.SpanOf(m.Frame, m.Error)
			edits = append(edits, jsonrpc.Edit{Span: jsonrpc.Span{Start: es.Start + s.Start, End: es.Start + s.End}, Value: []byte(strconv.Itoa(jsonrpc.CodeInvalidParams))})
		}
	}
	if own {
		return m.SpliceHead(edits...)
	}
	return jsonrpc.Splice(m.Frame, edits...)
}
