package mux

import (
	"encoding/json"
	"fmt"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// The fake server's modern side (2026-07-28), as the era: "dual" serves
// server/discover and every enveloped request modern, and initialize
// legacy, as the go-sdk does; "perrequest" lists the legacy revisions in
// its supportedVersions too and serves a request enveloped in one of them
// legacy, as mcp-go does; "modern" refuses initialize, as a modern-only
// server does. Modern requests must carry the envelope; the fake asks for
// input with input_required results, ends listens on notifications/
// cancelled, and sends the notifications of a listen tagged with its id.

const fakeModernCaps = `{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"logging":{}}`

// answerModern plays the modern server; false when m is not its business.
func (p *fakeProc) answerModern(m *jsonrpc.Message) bool {
	p.srv.mu.Lock()
	era := p.srv.era
	p.srv.mu.Unlock()
	if era == "" {
		return false
	}
	req := viewOf(m)
	env, enveloped := envelopeOf(&req)
	switch {
	case m.Method == "initialize" && era == "modern":
		p.reply((&jsonrpc.Error{Code: protocol.CodeUnsupportedVersion, Message: "Unsupported protocol version", Extra: map[string]any{"supported": []string{protocol.Modern}}}).Response(m.ID))
		return true
	case m.Method == "server/discover":
		versions := `["2026-07-28"]`
		if era == "perrequest" {
			versions = `["2026-07-28","2025-11-25","2025-06-18"]`
		}
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"supportedVersions":`+versions+`,"capabilities":`+fakeModernCaps+`,"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake-modern","version":"2"}}}`)))
		return true
	case !enveloped:
		if era == "modern" {
			p.reply((&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing the _meta envelope"}).Response(m.ID))
			return true
		}
		return false // dual: a legacy request, served legacy
	case era == "perrequest" && protocol.IsLegacy(env.version):
		return false // served in the revision it names
	}
	return p.modernRequest(m, env)
}

func (p *fakeProc) modernRequest(m *jsonrpc.Message, env envelope) bool {
	name := m.Method
	if name == "tools/call" {
		var c struct {
			Name string `json:"name"`
		}
		json.Unmarshal(m.Params, &c)
		name = c.Name
	}
	switch name {
	case "subscriptions/listen":
		p.modernListen(m)
	case "echo":
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"resultType":"complete","params":`+string(m.Params)+`}`)))
	case "elicit", "sample":
		p.modernInput(m, name, env)
	case "touch":
		p.touchListens()
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"resultType":"complete","content":[]}`)))
	case "log":
		if env.level != "" {
			p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"for ` + string(m.ID) + `"}}`))
		}
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"resultType":"complete"}`)))
	case "hang", "progress", "crash", "big":
		return false // as the legacy fake does
	case "tools/list":
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"resultType":"complete","tools":[],"ttlMs":0,"cacheScope":"public"}`)))
	default:
		p.reply((&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no " + m.Method}).Response(m.ID))
	}
	return true
}

// modernInput asks for input, the modern way: an input_required result
// until a retry brings it, then an answer that shows it.
func (p *fakeProc) modernInput(m *jsonrpc.Message, name string, env envelope) {
	if s, ok := m.ParamsPath("inputResponses", "in"); ok {
		state, _ := m.ParamsString("requestState")
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"resultType":"complete","answer":`+string(m.Frame[s.Start:s.End])+`,"state":"`+state+`"}`)))
		return
	}
	c := parseCaps(env.caps)
	method, params, ok := "elicitation/create", `{"message":"name?","requestedSchema":{"type":"object"}}`, c.elicitForm
	if name == "sample" {
		method, params, ok = "sampling/createMessage", `{"messages":[],"maxTokens":5}`, c.sampling
	}
	if !ok {
		p.reply((&jsonrpc.Error{Code: protocol.CodeMissingCapability, Message: "cannot ask for " + method}).Response(m.ID))
		return
	}
	p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"resultType":"input_required","inputRequests":{"in":{"method":"`+method+`","params":`+params+`}},"requestState":"round-1"}`)))
}

func (p *fakeProc) modernListen(m *jsonrpc.Message) {
	p.srv.mu.Lock()
	end := p.srv.listenEnd
	p.srv.mu.Unlock()
	switch end {
	case "answer":
		p.reply(jsonrpc.Response(m.ID, json.RawMessage(`{"resultType":"complete"}`)))
		return
	case "refuse":
		p.reply((&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no subscriptions/listen"}).Response(m.ID))
		return
	}
	p.listenMu.Lock()
	if p.listens == nil {
		p.listens = map[string]*jsonrpc.Message{}
	}
	p.listens[string(m.ID)] = m
	p.listenMu.Unlock()
	var f struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	json.Unmarshal(m.Params, &f)
	p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":` + string(f.Notifications) + `,"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(m.ID) + `}}}`))
}

// touchListens sends each open listen what it asked for: an update of
// test://r and a tools list change.
func (p *fakeProc) touchListens() {
	p.listenMu.Lock()
	open := make(map[string]*jsonrpc.Message, len(p.listens))
	for id, l := range p.listens {
		open[id] = l
	}
	p.listenMu.Unlock()
	for id, l := range open {
		var f listenFilter
		if s, ok := l.ParamsPath("notifications"); ok {
			json.Unmarshal(l.Frame[s.Start:s.End], &f)
		}
		for _, uri := range f.ResourceSubscriptions {
			if uri == "test://r" {
				p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://r","_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}}`))
			}
		}
		if f.ToolsListChanged {
			p.reply([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}}`))
		}
	}
}

// openListens counts the listens open at the fake.
func (p *fakeProc) openListens() int {
	p.listenMu.Lock()
	defer p.listenMu.Unlock()
	return len(p.listens)
}

// listenIDs are the ids of the listens open at the fake.
func (p *fakeProc) listenIDs() []string {
	p.listenMu.Lock()
	defer p.listenMu.Unlock()
	var out []string
	for id := range p.listens {
		out = append(out, id)
	}
	return out
}

// started counts the processes the fake started.
func (f *fakeServer) started() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.procs)
}

// dropListen forgets a listen; false when it was not open.
func (p *fakeProc) dropListen(id string) bool {
	p.listenMu.Lock()
	defer p.listenMu.Unlock()
	_, ok := p.listens[id]
	delete(p.listens, id)
	return ok
}

// endListen ends a listen the server's way, and says whether it was open.
func (p *fakeProc) endListen(id string) bool {
	if !p.dropListen(id) {
		return false
	}
	p.reply([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s}}`, id)))
	return true
}
