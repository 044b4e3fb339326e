package mux

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// subscriptions/listen, the modern revision's one way to hear of changes,
// in its three pairings:
//
//   - a modern session on a modern server: the listen is forwarded like any
//     request, and every notification of its stream (tagged with the
//     listen's id in _meta.subscriptionId, which is mcpmux's upstream id)
//     goes to its owner alone, tagged with the session's own id;
//   - a modern session on a legacy server: mcpmux serves the listen itself
//     (localListens), joining its URIs to the counted resources/subscribe
//     the legacy sessions share, and tags the list changes and updates it
//     asked for;
//   - legacy sessions on a modern server: mcpmux holds one listen of its
//     own (ownedListen) for their list changes and the URIs they
//     subscribed, and opens it anew when that set changes.

// listenFilter is the notifications a listen asks for.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// wants reports whether the filter asks for notifications of method.
func (f listenFilter) wants(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	}
	return false
}

// honoured is the part of a filter a server with info can serve.
func (f listenFilter) honoured(info *serverInfo) listenFilter {
	out := listenFilter{
		ToolsListChanged:     f.ToolsListChanged && info.has("tools"),
		PromptsListChanged:   f.PromptsListChanged && info.has("prompts"),
		ResourcesListChanged: f.ResourcesListChanged && info.has("resources"),
	}
	if info.hasPath("resources", "subscribe") {
		out.ResourceSubscriptions = f.ResourceSubscriptions
	}
	return out
}

// localListen is a modern session's listen that mcpmux serves itself.
type localListen struct {
	session uint64
	id      json.RawMessage // the session's id of the listen request
	tag     uint64          // the tag it came in under: its notifications carry it
	holder  uint64          // what it counts as in the subscriptions table
	filter  listenFilter
}

type listenKey struct {
	session uint64
	id      string
}

// localListens are the listens mcpmux serves for a legacy server.
// Invariant: each listen's URIs are counted in the subscriptions table
// under its holder id exactly while it is here.
type localListens struct {
	mu        sync.Mutex
	byKey     map[listenKey]*localListen
	byHolder  map[uint64]*localListen
	bySession map[uint64]map[string]bool // the ids in byKey by session: a departure visits only its own
}

func (t *localListens) add(l *localListen) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := listenKey{l.session, string(l.id)}
	if t.byKey[k] != nil {
		return false
	}
	if t.byKey == nil {
		t.byKey, t.byHolder = make(map[listenKey]*localListen), make(map[uint64]*localListen)
		t.bySession = make(map[uint64]map[string]bool)
	}
	t.byKey[k], t.byHolder[l.holder] = l, l
	if t.bySession[l.session] == nil {
		t.bySession[l.session] = map[string]bool{}
	}
	t.bySession[l.session][k.id] = true
	return true
}

func (t *localListens) remove(session uint64, id []byte) *localListen {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byKey[listenKey{session, string(id)}]
	if l != nil {
		delete(t.byKey, listenKey{session, string(id)})
		delete(t.byHolder, l.holder)
		mine := t.bySession[session]
		delete(mine, string(id))
		if len(mine) == 0 {
			delete(t.bySession, session)
		}
	}
	return l
}

func (t *localListens) drop(session uint64) []*localListen {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*localListen
	for id := range t.bySession[session] {
		k := listenKey{session, id}
		l := t.byKey[k]
		out = append(out, l)
		delete(t.byKey, k)
		delete(t.byHolder, l.holder)
	}
	delete(t.bySession, session)
	return out
}

func (t *localListens) holder(id uint64) *localListen {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byHolder[id]
}

// wanting is every listen that asked for notifications of method.
func (t *localListens) wanting(method string) []*localListen {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*localListen
	for _, l := range t.byKey {
		if l.filter.wants(method) {
			out = append(out, l)
		}
	}
	return out
}

// ownedListen is the listen mcpmux holds on a modern server for its legacy
// sessions. Invariant: up is the upstream id of the one open listen, 0 when
// none is; want is the filter it should have, and gen counts changes of it,
// so that of two concurrent reopenings the later one wins. A listen the
// server ends soon after it was opened is opened again after a delay that
// doubles each time (retry holds the pending reopening); one it refuses
// with an error is not asked of that process again.
type ownedListen struct {
	mu      sync.Mutex
	up      int64
	want    string
	gen     uint64
	since   time.Time     // when up was opened
	delay   time.Duration // the last wait before a reopening
	retry   *time.Timer   // the pending reopening; nil when none is
	retries uint64        // counts reopenings set, so that a stopped one that fires anyway does nothing
	refused bool          // the process answered the listen with an error
}

// Reopening a listen the server ended: at once when it lasted
// listenSettled, else after a delay from listenRetryMin, doubling up to
// listenRetryMax.
const (
	listenSettled  = 10 * time.Second
	listenRetryMin = 250 * time.Millisecond
	listenRetryMax = time.Minute
)

// change records the filter wanted now; false when that is what is open or
// being opened.
func (o *ownedListen) change(want string) (uint64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if want == o.want {
		return 0, false
	}
	o.want = want
	o.gen++
	return o.gen, true
}

// opened records the listen opened for change gen; it returns the listen
// that is now surplus (the one before, or this one if a later change came
// first), 0 none.
func (o *ownedListen) opened(gen uint64, up int64) (surplus int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if gen != o.gen {
		return up
	}
	surplus, o.up, o.since = o.up, up, time.Now()
	return surplus
}

// held: no listen is to be opened now, the process having refused it or a
// reopening being due later.
func (o *ownedListen) held() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused || o.retry != nil
}

// ended forgets the open listen up, which the server ended (refused: with
// an error), and says how long to wait before opening it again; false when
// up is not the open listen.
func (o *ownedListen) ended(up int64, refused bool, now time.Time) (wait time.Duration, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if up == 0 || o.up != up {
		return 0, false
	}
	o.up, o.want = 0, ""
	switch {
	case refused:
		o.refused = true
	case now.Sub(o.since) >= listenSettled:
		o.delay = 0
	default:
		o.delay = min(max(2*o.delay, listenRetryMin), listenRetryMax)
	}
	return o.delay, true
}

// later runs reopen after wait, unless the process exits first.
func (o *ownedListen) later(wait time.Duration, reopen func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.retry != nil {
		return
	}
	o.retries++
	n := o.retries
	o.retry = time.AfterFunc(wait, func() {
		if o.due(n) {
			reopen()
		}
	})
}

// due clears the pending reopening n; false when it was cancelled.
func (o *ownedListen) due(n uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.retry == nil || o.retries != n {
		return false
	}
	o.retry = nil
	return true
}

// lost forgets the open listen and whatever the process did to it: the
// process exited.
func (o *ownedListen) lost() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.retry != nil {
		o.retry.Stop()
	}
	o.up, o.want, o.delay, o.retry, o.refused = 0, "", 0, nil, false
}

// listen serves a modern session's subscriptions/listen.
func (c *client) listen(m *message, mr *modernReq, out sink) {
	_, info, err := c.waitReady()
	if err != nil {
		c.failWith(out, m.ID, err)
		return
	}
	if info.era == eraModern {
		c.forward(m, out, fwd{modern: mr, listen: true})
		return
	}
	var p struct {
		Notifications listenFilter `json:"notifications"`
	}
	if m.Params != nil {
		json.Unmarshal(m.Params, &p)
	}
	l := &localListen{session: c.sess.ID(), id: m.ID, tag: out.tag(), holder: c.h.sessions.nextID(), filter: p.Notifications.honoured(info)}
	if !c.h.down.local.add(l) {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "a listen with id " + string(m.ID) + " is already open on this session", Reason: jsonrpc.ReasonDuplicateID})
		return
	}
	// The acknowledgement says the subscriptions are in place: it goes once
	// the server has answered each subscribe it needed, so that what the
	// client does next (a call that changes the resource) cannot reach a
	// server that runs requests at once before the subscribe.
	proc := c.h.life.current()
	for _, uri := range l.filter.ResourceSubscriptions {
		if first, _ := c.h.subs.add(uri, l.holder); first {
			c.h.subscribeUp(proc, uri)
		}
	}
	ack, _ := json.Marshal(map[string]any{"notifications": l.filter, "_meta": map[string]json.RawMessage{protocol.MetaSubscriptionID: l.id}})
	n, _ := jsonrpc.Notification("notifications/subscriptions/acknowledged", json.RawMessage(ack))
	c.sendAbout(l.tag, n)
}

// subscribeWait bounds how long a listen's acknowledgement waits for the
// server's answer to one of its subscribes.
const subscribeWait = 5 * time.Second

// subscribeUp subscribes the server to uri for a listen mcpmux serves and
// waits, within subscribeWait, for its answer; a failure is logged, and the
// listen is served all the same (the server may still send its updates).
func (h *Hub) subscribeUp(proc process, uri string) {
	if proc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), subscribeWait)
	defer cancel()
	m, err := h.call(ctx, proc, "resources/subscribe", map[string]string{"uri": uri})
	switch {
	case err != nil:
		h.log.Debug("a listen's subscribe", "uri", uri, "err", err)
	case m.Kind == jsonrpc.KindError:
		h.log.Debug("a listen's subscribe refused", "uri", uri, "error", string(m.Error))
	}
}

// endLocalListen ends a listen mcpmux serves, at its session's request;
// false when the session has no such listen.
func (b *downBridge) endLocalListen(c *client, id []byte) bool {
	l := b.local.remove(c.sess.ID(), id)
	if l == nil {
		return false
	}
	b.releaseListen(l)
	return true
}

func (b *downBridge) releaseListen(l *localListen) {
	h := b.h
	proc := h.life.current()
	for _, uri := range l.filter.ResourceSubscriptions {
		if last, _ := h.subs.remove(uri, l.holder); last {
			h.fire(proc, "resources/unsubscribe", map[string]string{"uri": uri})
		}
	}
}

// stamp tags a notification with a listen's id, as the session knows it.
func stamp(frame []byte, id json.RawMessage) []byte {
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		return frame
	}
	meta, _ := metaSpan(m)
	return jsonrpc.Splice(m.Frame, injectEnvelope(m, meta, map[string]json.RawMessage{protocol.MetaSubscriptionID: id}))
}

// toLocalListens sends a legacy server's list change to the modern
// sessions listening for it.
func (b *downBridge) toLocalListens(m *jsonrpc.Message) {
	h := b.h
	for _, l := range b.local.wanting(m.Method) {
		if c := h.sessions.get(l.session); c != nil {
			c.sendAbout(l.tag, stamp(m.Frame, l.id))
		}
	}
}

// routeTagged routes a notification that names a listen in its _meta; false
// when it names none.
func (u *upstreamHandler) routeTagged(m *message) bool {
	h := u.h
	s, ok := m.p.inMeta(mSubscriptionID)
	if !ok {
		return false
	}
	up, ok := upstreamID(m.Frame[s.Start:s.End])
	var r idmap.Route
	if ok {
		r, ok = h.flights.get(up)
	}
	switch {
	case !ok:
		h.log.Debug("dropped a notification of a listen not open", "method", m.Method)
	case r.Session == 0 && r.Method == "subscriptions/listen":
		h.up.fromOwnedListen(m.Message)
	case dataOf(r).isListen():
		if c := h.sessions.get(r.Session); c != nil {
			c.sendAbout(r.Tag, jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: s, Value: r.ID}))
		}
	}
	return true
}

// fromOwnedListen fans a notification of mcpmux's own listen out to the
// legacy sessions, as a legacy server would have sent it.
func (b *upBridge) fromOwnedListen(m *jsonrpc.Message) {
	h := b.h
	if m.Method == "notifications/subscriptions/acknowledged" {
		return
	}
	frame := m.Frame
	if e, ok := withoutMember(m, protocol.MetaSubscriptionID); ok {
		frame = jsonrpc.Splice(m.Frame, e)
	}
	plain, err := jsonrpc.Parse(frame)
	if err != nil {
		return
	}
	switch {
	case plain.Method == "notifications/resources/updated":
		view := viewOf(plain)
		h.routeUpdated(&view)
	case strings.HasSuffix(plain.Method, "/list_changed"):
		h.broadcast(plain.Frame)
	}
}

// withoutMember is the edit that takes one member out of a message's _meta.
func withoutMember(m *jsonrpc.Message, name string) (jsonrpc.Edit, bool) {
	s, ok := metaSpan(m)
	if !ok {
		return jsonrpc.Edit{}, false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m.Frame[s.Start:s.End], &meta) != nil {
		return jsonrpc.Edit{}, false
	}
	delete(meta, name)
	b, _ := json.Marshal(meta)
	return jsonrpc.Edit{Span: s, Value: b}, true
}

// syncOwnedListen opens, reopens or closes mcpmux's own listen on a modern
// server so that it asks for what the legacy sessions want: list changes
// while any legacy session is there, and the URIs they subscribed.
func (b *upBridge) syncOwnedListen() {
	h := b.h
	info, proc := h.describedServer(), h.life.current()
	if info == nil || info.era != eraModern || proc == nil || b.owned.held() {
		return
	}
	f := listenFilter{}
	if b.hasLegacySessions() {
		f = listenFilter{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true, ResourceSubscriptions: h.subs.uris()}
		f = f.honoured(info)
	}
	want, _ := json.Marshal(f)
	if string(want) == "{}" {
		want = nil
	}
	gen, changed := b.owned.change(string(want))
	if !changed {
		return
	}
	var up int64
	if want != nil {
		up, _ = h.flights.begin(idmap.Route{Session: 0, ID: h.calls.own("listen-"), Method: "subscriptions/listen", Started: time.Now()})
	}
	// Recorded before it is sent: the server may answer it at once.
	surplus := b.owned.opened(gen, up)
	if surplus != 0 {
		h.flights.take(surplus)
	}
	if surplus != 0 && surplus != up {
		proc.Send(cancelFrame(surplus, "mcpmux changed what it listens for"))
	}
	if up != 0 && surplus != up {
		b.sendOwnedListen(proc, up, f)
	}
}

// sendOwnedListen sends mcpmux's own listen up; when it cannot, up is
// forgotten, to be opened again when the legacy sessions next change.
func (b *upBridge) sendOwnedListen(proc process, up int64, f listenFilter) {
	h := b.h
	frame, err := jsonrpc.Request(json.RawMessage(strconv.FormatInt(up, 10)), "subscriptions/listen", map[string]any{"notifications": f, "_meta": h.ownEnvelope()})
	if err == nil {
		err = proc.Send(frame)
	}
	if err != nil {
		h.flights.take(up)
		b.owned.ended(up, false, time.Now())
		h.log.Warn("mcpmux could not send its listen", "error", err)
	}
}

// ownedListenEnded: the server ended mcpmux's own listen, by answering it
// (refusal: the error it answered with) or cancelling it. It is opened
// again, after a delay when it lasted only moments; a refused one is not.
func (b *upBridge) ownedListenEnded(up int64, refusal json.RawMessage) {
	h := b.h
	wait, ok := b.owned.ended(up, refusal != nil, time.Now())
	switch {
	case !ok:
	case refusal != nil:
		h.log.Warn("the server refused mcpmux's listen: its legacy sessions get no list changes or resource updates until it restarts", "error", string(refusal))
	case wait == 0:
		h.log.Info("the server ended mcpmux's listen; opening it again")
		b.syncOwnedListen()
	default:
		h.log.Info("the server ended mcpmux's listen soon after it was opened; opening it again later", "in", wait)
		b.owned.later(wait, b.syncOwnedListen)
	}
}

func (b *upBridge) hasLegacySessions() bool {
	h := b.h
	return slices.ContainsFunc(h.sessions.all(), func(c *client) bool { return c.sessionEra() == eraLegacy })
}

// legacyJoined: a legacy session completed its handshake.
func (b *upBridge) legacyJoined() { b.syncOwnedListen() }
