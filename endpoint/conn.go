package endpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
	"github.com/mcpmux/mcpmux/session"
)

// member is one member server, as one client session of the endpoint
// sees it: a session of the server's router over a pipe.
type member struct {
	name string
	p    *pipe // nil when the server was not served when the session began

	// Under conn.mu.
	gone        bool            // its session ended (or never began)
	ready       bool            // its session answered initialize
	initPending bool            // an initialize is on its way to it
	initErr     json.RawMessage // the error object of its last failed initialize
}

// conn is one client session of an endpoint: the session.Handler of the
// client's session, and the endpoint side of each member's pipe.
type conn struct {
	e       *Endpoint
	cfg     Config // the endpoint as configured when the session began
	sess    *session.Session
	peer    session.Peer
	sep     string
	members []*member     // in the order configured
	stop    chan struct{} // closed when the client's session is over

	mu         sync.Mutex
	initParams json.RawMessage    // the client's initialize params; nil before it
	nextID     int64              // ids of the requests to the members
	calls      map[int64]*call    // the requests to the members in flight, by id
	byClient   map[string][]int64 // the same, by the client's request id
	nextSrvReq int64
	srvReqs    map[int64]srvReq   // the members' requests to the client in flight, by the id the client sees
	changed    map[string]bool    // a list_changed went to the client, and it has not listed since
	uris       map[string]*member // resource URI -> member, from the lists
	templates  map[string]*member // resource template's fixed start -> member, from the lists
	fans       map[*fan]struct{}  // fans in flight (so that a cancel finds them)
}

// call is a request to a member in flight.
type call struct {
	m        *member
	clientID json.RawMessage // nil for an initialize of the endpoint's own
	tag      uint64
	fan      *fan // nil: the answer goes to the client as it is
	idx      int  // the member's place in fan.answers
	reinit   bool // an initialize sent ahead of a request to a member not yet initialized
}

// fan is a client request sent to several members, answered once they all
// have.
type fan struct {
	method   string
	paged    bool // a list's later page
	clientID json.RawMessage
	tag      uint64
	left     int
	answers  []fanAnswer
}

type fanAnswer struct {
	m      *member
	result json.RawMessage // nil on an error
	err    json.RawMessage
}

// srvReq is a member's request to the client in flight.
type srvReq struct {
	m  *member
	id json.RawMessage // the member session's id
}

func newConn(e *Endpoint, sess *session.Session, peer session.Peer) *conn {
	c := &conn{
		e: e, cfg: e.Config(), sess: sess, peer: peer, stop: make(chan struct{}),
		calls: map[int64]*call{}, byClient: map[string][]int64{}, srvReqs: map[int64]srvReq{},
		changed: map[string]bool{}, uris: map[string]*member{}, templates: map[string]*member{},
		fans: map[*fan]struct{}{},
	}
	c.sep = c.cfg.separator()
	return c
}

// open starts a session of each member's router, in wg.
func (c *conn) open(ctx context.Context, wg *sync.WaitGroup) {
	for _, name := range c.cfg.Servers {
		m := &member{name: name, gone: true}
		c.members = append(c.members, m)
		srv, ok := c.e.opts.Lookup(name)
		if !ok {
			c.sess.Logger().Warn("endpoint member is not served", "server", name)
			continue
		}
		m.gone = false
		m.p = newPipe(func(f frame) { c.fromMember(m, f) }, c.sess.Flush)
		peer := session.Peer{
			Transport: "endpoint",
			Addr:      fmt.Sprintf("endpoint %s session %d (%s %s)", c.cfg.Name, c.sess.ID(), c.peer.Transport, c.peer.Addr),
			Dir:       c.peer.Dir,
			// A sessionless 2026-07-28 POST is one request on each member
			// too: its input_required retry comes on another POST, so the
			// member's hub must not tie the requestState to this session.
			OneRequest: c.peer.OneRequest,
			Client:     c.peer.Client, // an isolated member keeps one process per client
			OnDemand:   true,          // lists and initialize come from memory; a call starts a lazy server
		}
		wg.Go(func() {
			err := srv.Serve(ctx, m.p, peer)
			m.p.Close()
			c.memberGone(m, err)
		})
	}
}

// closeMembers ends every member's session.
func (c *conn) closeMembers() {
	close(c.stop)
	for _, m := range c.members {
		if m.p != nil {
			m.p.Close()
		}
	}
}

// HandleMessage serves one message of the client.
func (c *conn) HandleMessage(_ *session.Session, msg *jsonrpc.Message, tag uint64) {
	switch msg.Kind {
	case jsonrpc.KindRequest:
		c.request(msg, tag)
	case jsonrpc.KindNotification:
		c.notification(msg)
	case jsonrpc.KindResult, jsonrpc.KindError:
		c.answerToMember(msg)
	}
}

// HandleBatch refuses a batch, as every session does.
func (c *conn) HandleBatch(s *session.Session, _ []byte, tag uint64) {
	s.Reply(nil, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "batches are not supported", Reason: jsonrpc.ReasonBatchNotSupported})
}

// WaitRoom returns at once: the client's session bounds its requests in
// flight, and each member's pipe holds back its writer.
func (c *conn) WaitRoom(context.Context) error { return nil }

// Flush has nothing to do: what goes to the client is sent at once.
func (c *conn) Flush() {}

// reply sends an answer to the client as the last frame for tag, at once.
func (c *conn) reply(tag uint64, frame []byte) {
	c.queue(outbox.Frame{Data: frame, Tag: tag, Last: true})
	c.sess.Flush()
}

// queue queues a frame for the client until the next Flush: what a
// member's router hands over together goes to the client in one write,
// written by the router's goroutine when the client takes it at once.
func (c *conn) queue(f outbox.Frame) {
	c.sess.SendLater(f)
}

// fail answers a client request with an error of the endpoint's.
func (c *conn) fail(id json.RawMessage, tag uint64, e *jsonrpc.Error) {
	if e.Server == "" {
		e = e.WithServer(c.cfg.Name)
	}
	c.reply(tag, e.Response(id))
}

// unavailable is the error of a request routed to a member that cannot take it.
func unavailable(m *member, why string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("server %s is unavailable: %s", m.name, why),
		Reason: jsonrpc.ReasonUpstreamUnavailable, Server: m.name}
}

// request serves a request of the client.
func (c *conn) request(msg *jsonrpc.Message, tag uint64) {
	switch msg.Method {
	case "initialize":
		c.initialize(msg, tag)
		return
	case "ping":
		c.reply(tag, jsonrpc.Response(msg.ID, json.RawMessage("{}")))
		return
	case "server/discover": // the 2026-07-28 probe: the members' routers answer it from what they know
		c.fanOut(msg.Method, msg.ID, tag, c.live(), func(_ *member, id []byte) []byte { return msg.WithID(id) })
		return
	}
	// A 2026-07-28 request carries its session in its _meta envelope, and
	// the members' routers serve it as such: no initialize comes first.
	if _, enveloped := msg.ParamsPath("_meta", protocol.MetaProtocolVersion); !enveloped && !c.initialized() {
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session not initialized: send initialize first", Reason: jsonrpc.ReasonNotInitialized})
		return
	}
	switch msg.Method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		c.list(msg, tag)
	case "tools/call":
		c.routeByName(msg, tag, "tools")
	case "prompts/get":
		c.routeByName(msg, tag, "prompts")
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		c.routeByURI(msg, tag)
	case "completion/complete":
		c.complete(msg, tag)
	case "logging/setLevel":
		c.fanOut(msg.Method, msg.ID, tag, c.live(), func(_ *member, id []byte) []byte { return msg.WithID(id) })
	default:
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q is not served by an endpoint", msg.Method), Reason: jsonrpc.ReasonMethodNotFound})
	}
}

func (c *conn) initialized() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.initParams != nil
}

// live are the members whose session has not ended.
func (c *conn) live() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*member
	for _, m := range c.members {
		if !m.gone {
			out = append(out, m)
		}
	}
	return out
}

// initialize opens every member's session with the client's own
// initialize, and answers with what they answered, together.
func (c *conn) initialize(msg *jsonrpc.Message, tag uint64) {
	params := msg.Params
	if params == nil {
		params = json.RawMessage("{}")
	}
	targets := c.beginInit(params)
	c.fanOut(msg.Method, msg.ID, tag, targets, func(_ *member, id []byte) []byte { return msg.WithID(id) })
}

// beginInit keeps the client's initialize params and returns the members
// to send it to, each marked as being initialized.
func (c *conn) beginInit(params json.RawMessage) []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.initParams = params
	var out []*member
	for _, m := range c.members {
		if !m.gone {
			m.initPending, m.ready = true, false
			out = append(out, m)
		}
	}
	return out
}

// initializedFrame is the notification that follows each initialize to a
// member.
var initializedFrame = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

// fanOut sends a request of the client to each of targets (frameFor makes
// its frame under the id given) and answers once all have answered.
func (c *conn) fanOut(method string, clientID json.RawMessage, tag uint64, targets []*member, frameFor func(m *member, id []byte) []byte) {
	c.fanOutPaged(method, false, clientID, tag, targets, frameFor)
}

// fanOutPaged is fanOut for a list, paged when it asks for a later page.
func (c *conn) fanOutPaged(method string, paged bool, clientID json.RawMessage, tag uint64, targets []*member, frameFor func(m *member, id []byte) []byte) {
	f := &fan{method: method, paged: paged, clientID: clientID, tag: tag, answers: make([]fanAnswer, len(targets))}
	c.sess.Begin()
	sends, done := c.register(f, targets)
	for _, s := range sends {
		c.send(s.m, s.before, frame{frameFor(s.m, s.id), uint64(s.n)})
		if method == "initialize" {
			c.send(s.m, nil, frame{slices.Clone(initializedFrame), 0})
		}
	}
	if done {
		c.finish(f)
		c.sess.Flush()
	}
}

// outgoing is a request to send to a member under id (call n), after the
// frames of before (an initialize of the endpoint's own, when the member
// needs one).
type outgoing struct {
	m      *member
	id     []byte
	n      int64
	before []frame
}

// frame is a frame to a member, with its tag: the id of the call it is,
// which the member's router puts on every frame it sends about it
// (progress, its own requests, the answer); 0 for one about no call.
type frame struct {
	data []byte
	tag  uint64
}

// register records the calls of fan f to targets; done is true when none
// could be sent (the fan is answered at once). A target whose session has
// ended counts as answered with an error.
func (c *conn) register(f *fan, targets []*member) (sends []outgoing, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range targets {
		f.answers[i].m = m
		if m.gone {
			f.answers[i].err = errObject(unavailable(m, "its session ended"))
			continue
		}
		f.left++
		n := c.newCall(&call{m: m, clientID: f.clientID, tag: f.tag, fan: f, idx: i})
		sends = append(sends, outgoing{m: m, id: idOf(n), n: n, before: c.initFirst(m, f.method)})
	}
	if f.left == 0 {
		return sends, true
	}
	c.fans[f] = struct{}{}
	return sends, false
}

// newCall records a call under a new id, which it returns. c.mu is held.
func (c *conn) newCall(cl *call) int64 {
	c.nextID++
	c.calls[c.nextID] = cl
	if cl.clientID != nil {
		k := string(cl.clientID)
		c.byClient[k] = append(c.byClient[k], c.nextID)
	}
	return c.nextID
}

// idOf is call n's id on the wire.
func idOf(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// initFirst returns the frames that initialize m's session before a
// request of method, when it is not initialized and no initialize is on
// its way: it failed before, or began while the server was unavailable.
// c.mu is held.
func (c *conn) initFirst(m *member, method string) []frame {
	if method == "initialize" || m.ready || m.initPending || c.initParams == nil {
		return nil
	}
	m.initPending = true
	n := c.newCall(&call{m: m, reinit: true})
	req, err := jsonrpc.Request(idOf(n), "initialize", c.initParams)
	if err != nil {
		return nil
	}
	return []frame{{req, uint64(n)}, {slices.Clone(initializedFrame), 0}}
}

// send writes frames to a member's session; false when it has ended (its
// calls are then answered by memberGone).
func (c *conn) send(m *member, before []frame, f frame) bool {
	for _, b := range before {
		if !m.p.write(c.stop, b) {
			return false
		}
	}
	return m.p.write(c.stop, f)
}

// errObject is the error member of e's response.
func errObject(e *jsonrpc.Error) json.RawMessage {
	return jsonrpc.Member(e.Response(nil), "error")
}

// routeByName routes tools/call or prompts/get by the prefix of its name.
func (c *conn) routeByName(msg *jsonrpc.Message, tag uint64, kind string) {
	name, _ := msg.ParamsString("name")
	span, ok := msg.ParamsPath("name")
	m, rest := c.byPrefix(name)
	reason, what := jsonrpc.ReasonUnknownTool, "tool"
	if kind == "prompts" {
		reason, what = jsonrpc.ReasonUnknownPrompt, "prompt"
	}
	switch {
	case !ok || m == nil:
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("unknown %s %q: the names of endpoint %s are SERVER%sNAME, its servers %s", what, name, c.cfg.Name, c.sep, strings.Join(c.cfg.Servers, ", ")),
			Reason:  reason})
		return
	case kind == "tools" && !c.cfg.Visible(name):
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name), Reason: reason})
		return
	}
	quoted, _ := json.Marshal(rest)
	c.forward(m, msg, tag, jsonrpc.Edit{Span: span, Value: quoted})
}

// byPrefix finds the member whose name prefixes name (the longest such),
// and the rest of name.
func (c *conn) byPrefix(name string) (*member, string) {
	var best *member
	for _, m := range c.members {
		if strings.HasPrefix(name, m.name+c.sep) && (best == nil || len(m.name) > len(best.name)) {
			best = m
		}
	}
	if best == nil {
		return nil, ""
	}
	return best, name[len(best.name)+len(c.sep):]
}

// forward sends a client request to one member under a new id, with the
// edits given, and its answer back to the client.
func (c *conn) forward(m *member, msg *jsonrpc.Message, tag uint64, edits ...jsonrpc.Edit) {
	n, before, err := c.registerOne(m, msg.ID, tag, msg.Method)
	if err != nil {
		c.fail(msg.ID, tag, err)
		return
	}
	c.sess.Begin()
	idSpan, _ := msg.IDSpan()
	c.send(m, before, frame{jsonrpc.Splice(msg.Frame, append(edits, jsonrpc.Edit{Span: idSpan, Value: idOf(n)})...), uint64(n)})
}

// registerOne records a routed call to m.
func (c *conn) registerOne(m *member, clientID json.RawMessage, tag uint64, method string) (n int64, before []frame, err *jsonrpc.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.gone {
		return 0, nil, unavailable(m, "it is not served")
	}
	return c.newCall(&call{m: m, clientID: clientID, tag: tag}), c.initFirst(m, method), nil
}

// routeByURI routes a request about a resource to the member that listed it.
func (c *conn) routeByURI(msg *jsonrpc.Message, tag uint64) {
	uri, _ := msg.ParamsString("uri")
	m := c.ownerOf(uri)
	if m == nil {
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("unknown resource %q: no server of endpoint %s (%s) listed it", uri, c.cfg.Name, strings.Join(c.cfg.Servers, ", ")),
			Reason:  jsonrpc.ReasonUnknownResource})
		return
	}
	c.forward(m, msg, tag)
}

// ownerOf is the member that listed uri, or whose template starts it; nil
// when none did.
func (c *conn) ownerOf(uri string) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.uris[uri]; ok {
		return m
	}
	var best *member
	longest := -1
	for start, m := range c.templates {
		if strings.HasPrefix(uri, start) && len(start) > longest {
			best, longest = m, len(start)
		}
	}
	return best
}

// complete routes completion/complete by its ref: a prompt's name by its
// prefix, a resource's URI by the lists.
func (c *conn) complete(msg *jsonrpc.Message, tag uint64) {
	typ, _ := msg.ParamsString("ref", "type")
	switch typ {
	case "ref/prompt":
		name, _ := msg.ParamsString("ref", "name")
		span, ok := msg.ParamsPath("ref", "name")
		if m, rest := c.byPrefix(name); ok && m != nil {
			quoted, _ := json.Marshal(rest)
			c.forward(m, msg, tag, jsonrpc.Edit{Span: span, Value: quoted})
			return
		}
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name), Reason: jsonrpc.ReasonUnknownPrompt})
	case "ref/resource":
		uri, _ := msg.ParamsString("ref", "uri")
		if m := c.ownerOf(uri); m != nil {
			c.forward(m, msg, tag)
			return
		}
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown resource %q", uri), Reason: jsonrpc.ReasonUnknownResource})
	default:
		c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown ref type %q", typ), Reason: jsonrpc.ReasonInvalidRequest})
	}
}

// notification serves a notification of the client.
func (c *conn) notification(msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/cancelled":
		c.cancel(msg)
	case "notifications/roots/list_changed":
		for _, m := range c.live() {
			c.send(m, nil, frame{slices.Clone(msg.Frame), 0}) // a router may rewrite what it reads in place
		}
	}
	// notifications/initialized: each member had its own, after its initialize.
}

// cancel passes a client's cancellation to the members its request went
// to, and forgets the request: it is not answered.
func (c *conn) cancel(msg *jsonrpc.Message) {
	span, ok := msg.ParamsPath("requestId")
	if !ok {
		return
	}
	type out struct {
		m     *member
		frame []byte
	}
	var sends []out
	ended := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		key := string(msg.Frame[span.Start:span.End])
		ids := c.byClient[key]
		if len(ids) == 0 {
			return false
		}
		delete(c.byClient, key)
		for _, id := range ids {
			cl := c.calls[id]
			delete(c.calls, id)
			if cl.fan != nil {
				delete(c.fans, cl.fan)
			}
			sends = append(sends, out{cl.m, jsonrpc.Splice(msg.Frame, jsonrpc.Edit{Span: span, Value: strconv.AppendInt(nil, id, 10)})})
		}
		return true
	}()
	if !ended {
		return
	}
	c.sess.End()
	for _, s := range sends {
		c.send(s.m, nil, frame{s.frame, 0})
	}
}

// answerToMember passes the client's answer to a member's request back to
// that member, under the member's id.
func (c *conn) answerToMember(msg *jsonrpc.Message) {
	n, err := strconv.ParseInt(string(msg.ID), 10, 64)
	if err != nil {
		return
	}
	r, ok := func() (srvReq, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		r, ok := c.srvReqs[n]
		delete(c.srvReqs, n)
		return r, ok
	}()
	if ok {
		c.send(r.m, nil, frame{msg.WithID(r.id), 0})
	}
}
