package endpoint

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
)

// What comes back from the members: answers (merged when the request went
// to several), their own requests and notifications.

// listKeys are the members of the list results that hold the items.
var listKeys = map[string]string{
	"tools/list":               "tools",
	"prompts/list":             "prompts",
	"resources/list":           "resources",
	"resources/templates/list": "resourceTemplates",
}

// changedOf is the list_changed notification that a list's first page
// answers.
var changedOf = map[string]string{
	"tools/list":     "notifications/tools/list_changed",
	"prompts/list":   "notifications/prompts/list_changed",
	"resources/list": "notifications/resources/list_changed",
}

// list sends a list request to every member (a first page), or to those
// the cursor names, and answers with their items merged.
func (c *conn) list(msg *jsonrpc.Message, tag uint64) {
	cursor, paged := msg.ParamsString("cursor")
	var cursors map[string]string
	targets := c.members // those that cannot answer answer with what is known of them
	if paged {
		var err error
		if cursors, err = decodeCursor(cursor); err != nil {
			c.fail(msg.ID, tag, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor", Reason: jsonrpc.ReasonInvalidRequest})
			return
		}
		targets = slices.DeleteFunc(slices.Clone(c.members), func(m *member) bool { _, ok := cursors[m.name]; return !ok })
	} else {
		c.listed(msg.Method)
	}
	// Each member gets the client's request as it is (its _meta too), under
	// its own id and with its own cursor.
	idSpan, _ := msg.IDSpan()
	cursorSpan, _ := msg.ParamsPath("cursor")
	c.fanOutPaged(msg.Method, paged, msg.ID, tag, targets, func(m *member, id []byte) []byte {
		if !paged {
			return msg.WithID(id)
		}
		quoted, _ := json.Marshal(cursors[m.name])
		return jsonrpc.Splice(msg.Frame, jsonrpc.Edit{Span: idSpan, Value: id}, jsonrpc.Edit{Span: cursorSpan, Value: quoted})
	})
}

// listed notes that the client asked for a list afresh: a list_changed of
// it goes to the client again.
func (c *conn) listed(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.changed, changedOf[method])
}

// cursor encodes the members' own cursors, by member name.
func encodeCursor(next map[string]string) string {
	b, _ := json.Marshal(next)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (map[string]string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	var next map[string]string
	if err := json.Unmarshal(b, &next); err != nil {
		return nil, err
	}
	return next, nil
}

// fromMember takes a frame a member's session wrote. Its tag is the call
// it is about (0: none), whose client request's tag it gets in turn.
func (c *conn) fromMember(m *member, f frame) {
	msg, err := jsonrpc.Parse(f.data)
	if err != nil {
		return
	}
	switch msg.Kind {
	case jsonrpc.KindResult, jsonrpc.KindError:
		c.answerFromMember(m, msg)
	case jsonrpc.KindRequest:
		c.requestFromMember(m, msg, c.tagOf(m, f.tag))
	case jsonrpc.KindNotification:
		c.notificationFromMember(m, msg, c.tagOf(m, f.tag))
	}
}

// settled is what an answer from a member settled.
type settled struct {
	cl      *call
	done    bool            // the call's fan has all its answers
	initErr json.RawMessage // for a routed call that failed for want of an initialize: why that failed
}

// answerFromMember takes a member's answer to one of the endpoint's calls.
func (c *conn) answerFromMember(m *member, msg *jsonrpc.Message) {
	n, err := strconv.ParseInt(string(msg.ID), 10, 64)
	if err != nil {
		return // an answer to no request (a refused session's)
	}
	s := c.settle(m, n, msg)
	switch cl := s.cl; {
	case cl == nil || cl.reinit:
	case cl.fan != nil:
		if s.done {
			c.finish(cl.fan)
		}
	case s.initErr != nil:
		c.queue(outbox.Frame{Data: errorResponse(cl.clientID, s.initErr), Tag: cl.tag, Last: true})
		c.sess.End()
	default:
		c.queue(outbox.Frame{Data: msg.ReplaceID(cl.clientID), Tag: cl.tag, Last: true})
		c.sess.End()
	}
}

// settle records the answer to call n of m.
func (c *conn) settle(m *member, n int64, msg *jsonrpc.Message) (s settled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.calls[n]
	if cl == nil || cl.m != m {
		return s
	}
	delete(c.calls, n)
	c.dropClientID(cl.clientID, n)
	s.cl = cl
	ok := msg.Kind == jsonrpc.KindResult
	if cl.reinit || cl.fan != nil && cl.fan.method == "initialize" {
		m.initPending = false
		if m.ready = ok; ok {
			m.initErr = nil
		} else {
			m.initErr = slices.Clone(msg.Error)
		}
	}
	if cl.fan != nil {
		a := &cl.fan.answers[cl.idx]
		if ok {
			a.result = slices.Clone(msg.Result)
		} else {
			a.err = slices.Clone(msg.Error)
		}
		s.done = c.answered(cl.fan)
		return s
	}
	if !ok && m.initErr != nil && reasonOf(msg.Error) == jsonrpc.ReasonNotInitialized {
		s.initErr = m.initErr
	}
	return s
}

// answered counts one answer of fan f in; true when it was the last.
// c.mu is held.
func (c *conn) answered(f *fan) bool {
	f.left--
	if f.left > 0 {
		return false
	}
	_, inFlight := c.fans[f]
	delete(c.fans, f)
	return inFlight // a cancelled fan is not answered
}

// dropClientID forgets call n under the client's request id. c.mu is held.
func (c *conn) dropClientID(clientID json.RawMessage, n int64) {
	if clientID == nil {
		return
	}
	k := string(clientID)
	ids := slices.DeleteFunc(c.byClient[k], func(id int64) bool { return id == n })
	if len(ids) == 0 {
		delete(c.byClient, k)
	} else {
		c.byClient[k] = ids
	}
}

// reasonOf is the data.reason of an error object.
func reasonOf(errObj json.RawMessage) string {
	r, _ := jsonrpc.StringMember(jsonrpc.Member(errObj, "data"), "reason")
	return r
}

// errorResponse is an error response to id carrying the error object given.
func errorResponse(id, errObj json.RawMessage) []byte {
	out := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	out = append(out, `,"error":`...)
	out = append(out, errObj...)
	return append(out, '}')
}

// memberGone answers every call still waiting on m, whose session ended.
func (c *conn) memberGone(m *member, err error) {
	select {
	case <-c.stop:
	default:
		c.sess.Logger().Warn("endpoint member's session ended", "server", m.name, "error", err)
	}
	routed, fans := c.dropMember(m)
	for _, cl := range routed {
		c.reply(cl.tag, unavailable(m, "its session ended").Response(cl.clientID))
		c.sess.End()
	}
	for _, f := range fans {
		c.finish(f)
	}
	c.sess.Flush()
}

// dropMember marks m gone and takes its calls: the routed ones, and the
// fans that now have all their answers.
func (c *conn) dropMember(m *member) (routed []*call, fans []*fan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.gone, m.ready, m.initPending = true, false, false
	for n, cl := range c.calls {
		if cl.m != m {
			continue
		}
		delete(c.calls, n)
		c.dropClientID(cl.clientID, n)
		switch {
		case cl.reinit:
		case cl.fan != nil:
			cl.fan.answers[cl.idx].err = errObject(unavailable(m, "its session ended"))
			if c.answered(cl.fan) {
				fans = append(fans, cl.fan)
			}
		default:
			routed = append(routed, cl)
		}
	}
	for n, r := range c.srvReqs {
		if r.m == m {
			delete(c.srvReqs, n)
		}
	}
	return routed, fans
}

// requestFromMember passes a member's request (sampling, elicitation,
// roots, ping) to the client under an id of the endpoint's.
func (c *conn) requestFromMember(m *member, msg *jsonrpc.Message, tag uint64) {
	n := func() int64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.nextSrvReq++
		c.srvReqs[c.nextSrvReq] = srvReq{m: m, id: slices.Clone(msg.ID)}
		return c.nextSrvReq
	}()
	c.queue(outbox.Frame{Data: msg.WithID(strconv.AppendInt(nil, n, 10)), Tag: tag})
}

// notificationFromMember passes a member's notification to the client: a
// list_changed once until the client lists again, a cancellation of a
// request of the member's under the id the client saw.
func (c *conn) notificationFromMember(m *member, msg *jsonrpc.Message, tag uint64) {
	frame := msg.Frame
	switch msg.Method {
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		if !c.change(msg.Method) {
			return
		}
	case "notifications/cancelled":
		span, ok := msg.ParamsPath("requestId")
		if !ok {
			return
		}
		n, ok := c.takeSrvReq(m, msg.Frame[span.Start:span.End])
		if !ok {
			return
		}
		frame = jsonrpc.Splice(frame, jsonrpc.Edit{Span: span, Value: strconv.AppendInt(nil, n, 10)})
	}
	c.queue(outbox.Frame{Data: frame, Tag: tag})
}

// tagOf is the client's tag of the request that m's call n came from: a
// frame about the call goes with it, on transports that place frames by
// request (an HTTP POST's stream). 0 when n is 0 or no longer in flight.
func (c *conn) tagOf(m *member, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.calls[int64(n)]; cl != nil && cl.m == m {
		return cl.tag
	}
	return 0
}

// change notes a list_changed going to the client; false when one went
// already and the client has not listed since.
func (c *conn) change(method string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed[method] {
		return false
	}
	c.changed[method] = true
	return true
}

// takeSrvReq finds and forgets m's request of id.
func (c *conn) takeSrvReq(m *member, id []byte) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, r := range c.srvReqs {
		if r.m == m && string(r.id) == string(id) {
			delete(c.srvReqs, n)
			return n, true
		}
	}
	return 0, false
}

// finish queues the answer to a fan's client request, from what its
// members answered; the caller flushes.
func (c *conn) finish(f *fan) {
	var result []byte
	switch f.method {
	case "initialize":
		result = c.describe(f)
	case "server/discover":
		result = c.discovered(f)
	case "logging/setLevel":
		result = []byte("{}")
	default:
		result = c.merge(f)
	}
	c.queue(outbox.Frame{Data: jsonrpc.Response(f.clientID, result), Tag: f.tag, Last: true})
	c.sess.End()
}

// describe is the endpoint's initialize result: the union of the members'
// capabilities, and each member's instructions under its name.
func (c *conn) describe(f *fan) []byte {
	caps := map[string]any{}
	var version string
	var instructions []string
	for _, a := range f.answers {
		var r struct {
			ProtocolVersion string         `json:"protocolVersion"`
			Capabilities    map[string]any `json:"capabilities"`
			Instructions    string         `json:"instructions"`
		}
		if a.result == nil || json.Unmarshal(a.result, &r) != nil {
			continue
		}
		if version == "" {
			version = r.ProtocolVersion
		}
		unite(caps, r.Capabilities)
		if r.Instructions != "" {
			instructions = append(instructions, "## "+a.m.name+"\n\n"+r.Instructions)
		}
	}
	if version == "" { // no member answered: the client's own
		version, _ = jsonrpc.StringMember(c.clientInit(), "protocolVersion")
	}
	// The endpoint's lists change as its members come and go.
	unite(caps, map[string]any{"tools": map[string]any{"listChanged": true}})
	out := map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"serverInfo":      map[string]any{"name": "mcpmux", "title": "mcpmux endpoint " + c.cfg.Name, "version": c.e.opts.Version},
	}
	if len(instructions) > 0 {
		out["instructions"] = strings.Join(instructions, "\n\n")
	}
	b, _ := json.Marshal(out)
	return b
}

// discovered is the endpoint's server/discover result: the union of the
// members' capabilities and their instructions, as describe, with the
// versions that every member that answered supports.
func (c *conn) discovered(f *fan) []byte {
	caps := map[string]any{}
	var instructions []string
	var versions []string
	answered := false
	for _, a := range f.answers {
		var r struct {
			SupportedVersions []string       `json:"supportedVersions"`
			Capabilities      map[string]any `json:"capabilities"`
			Instructions      string         `json:"instructions"`
		}
		if a.result == nil || json.Unmarshal(a.result, &r) != nil {
			continue
		}
		if !answered {
			versions, answered = r.SupportedVersions, true
		} else {
			versions = slices.DeleteFunc(versions, func(v string) bool { return !slices.Contains(r.SupportedVersions, v) })
		}
		unite(caps, r.Capabilities)
		if r.Instructions != "" {
			instructions = append(instructions, "## "+a.m.name+"\n\n"+r.Instructions)
		}
	}
	if !answered {
		versions = protocol.Supported
	}
	unite(caps, map[string]any{"tools": map[string]any{"listChanged": true}})
	out := map[string]any{
		"resultType":        "complete",
		"ttlMs":             0,
		"cacheScope":        "private",
		"supportedVersions": append([]string{}, versions...),
		"capabilities":      caps,
		"_meta": map[string]any{protocol.MetaServerInfo: map[string]any{
			"name": "mcpmux", "title": "mcpmux endpoint " + c.cfg.Name, "version": c.e.opts.Version}},
	}
	if len(instructions) > 0 {
		out["instructions"] = strings.Join(instructions, "\n\n")
	}
	b, _ := json.Marshal(out)
	return b
}

// unite adds the capabilities of src to dst: objects are united member by
// member, and true wins over false.
func unite(dst, src map[string]any) {
	for k, v := range src {
		cur, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		cm, ok1 := cur.(map[string]any)
		vm, ok2 := v.(map[string]any)
		switch {
		case ok1 && ok2:
			unite(cm, vm)
		case v == true:
			dst[k] = true
		}
	}
}

// merge is a list result of the members' items, names prefixed and the
// view applied, with the cursor of the members that have more.
func (c *conn) merge(f *fan) []byte {
	key := listKeys[f.method]
	items := []json.RawMessage{}
	next := map[string]string{}
	modern := false
	for _, a := range f.answers {
		result, known := a.result, false
		switch {
		case f.paged:
		case result != nil:
			c.e.remember(a.m.name, f.method, result)
		default: // what is known of a member that cannot answer now
			result, known = c.e.recall(a.m.name, f.method), true
		}
		if result == nil {
			continue
		}
		var r map[string]json.RawMessage
		if json.Unmarshal(result, &r) != nil {
			continue
		}
		if _, ok := r["resultType"]; ok {
			modern = true
		}
		var list []json.RawMessage
		if json.Unmarshal(r[key], &list) != nil {
			continue
		}
		var cur string
		if json.Unmarshal(r["nextCursor"], &cur) == nil && cur != "" && !known {
			next[a.m.name] = cur
		}
		for _, item := range list {
			if item, ok := c.item(f.method, a.m, item); ok {
				items = append(items, item)
			}
		}
	}
	out := map[string]any{key: items}
	if modern {
		// The 2026-07-28 members' results say so, and so does the merge; a
		// list of this session's view is cached by no one else, and, being
		// a merge, for no time.
		out["resultType"], out["ttlMs"], out["cacheScope"] = "complete", 0, "private"
	}
	if len(next) > 0 {
		out["nextCursor"] = encodeCursor(next)
	}
	b, _ := json.Marshal(out)
	return b
}

// item is one list item as the client sees it: a tool or prompt renamed
// (ok is false for a tool outside the view), a resource recorded as m's.
func (c *conn) item(method string, m *member, item json.RawMessage) (json.RawMessage, bool) {
	switch method {
	case "tools/list", "prompts/list":
		name, ok := jsonrpc.StringMember(item, "name")
		span, found := jsonrpc.FindPath(item, "name")
		if !ok || !found {
			return nil, false
		}
		full := m.name + c.sep + name
		if method == "tools/list" && !c.cfg.Visible(full) {
			return nil, false
		}
		quoted, _ := json.Marshal(full)
		return jsonrpc.Splice(item, jsonrpc.Edit{Span: span, Value: quoted}), true
	case "resources/list":
		if uri, ok := jsonrpc.StringMember(item, "uri"); ok {
			c.own(c.uris, uri, m)
		}
	case "resources/templates/list":
		if t, ok := jsonrpc.StringMember(item, "uriTemplate"); ok {
			start, _, _ := strings.Cut(t, "{")
			c.own(c.templates, start, m)
		}
	}
	return item, true
}

// own records m as the owner of a resource URI or template start.
func (c *conn) own(table map[string]*member, key string, m *member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	table[key] = m
}

// clientInit is the client's initialize params; nil before it.
func (c *conn) clientInit() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.initParams
}
