package mux

import (
	"encoding/json"
	"strings"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
)

// The MCP state a server keeps "per connection" is, behind mcpmux, shared by
// every session; this file keeps it per session instead: resource
// subscriptions (counted per URI), log levels (the server gets the most
// verbose one any session wants), and task ownership.

// fire sends a request of mcpmux's own whose answer nobody waits for (its
// answer, routed to session 0 with no waiter, is dropped).
func (h *Hub) fire(proc process, method string, params any) {
	if proc == nil {
		return
	}
	up, err := h.reqs.Add(idmapRoute(json.RawMessage(`"fire-` + h.nextCallID() + `"`)))
	if err != nil {
		return
	}
	frame, err := jsonrpc.Request(json.RawMessage(itoa(up)), method, params)
	if err == nil {
		err = proc.Send(frame)
	}
	if err != nil {
		h.reqs.Take(up)
	}
}

// Subscriptions.

func uriOf(m *jsonrpc.Message) (string, bool) {
	s, ok := m.ParamsPath("uri")
	if !ok {
		return "", false
	}
	var uri string
	return uri, json.Unmarshal(m.Frame[s.Start:s.End], &uri) == nil
}

// subscribe counts a session in on a URI; the server sees only the first.
func (c *client) subscribe(m *jsonrpc.Message, out sink) {
	uri, ok := uriOf(m)
	if !ok {
		c.forward(m, out, nil) // the server explains what is wrong
		return
	}
	h, id := c.h, c.sess.ID()
	h.mu.Lock()
	holders := h.subs[uri]
	if holders[id] {
		h.mu.Unlock()
		out.reply(jsonrpc.Response(m.ID, json.RawMessage("{}")))
		return
	}
	first := len(holders) == 0
	if holders == nil {
		holders = map[uint64]bool{}
		h.subs[uri] = holders
	}
	holders[id] = true
	h.mu.Unlock()
	if !first {
		out.reply(jsonrpc.Response(m.ID, json.RawMessage("{}")))
		return
	}
	c.forward(m, out, func(ans *jsonrpc.Message) {
		if ans != nil && ans.Kind == jsonrpc.KindResult {
			return
		}
		// Refused or lost: the session holds nothing.
		h.mu.Lock()
		delete(h.subs[uri], id)
		if len(h.subs[uri]) == 0 {
			delete(h.subs, uri)
		}
		h.mu.Unlock()
	})
}

// unsubscribe counts a session out; the server sees the last one.
func (c *client) unsubscribe(m *jsonrpc.Message, out sink) {
	uri, ok := uriOf(m)
	if !ok {
		c.forward(m, out, nil)
		return
	}
	h, id := c.h, c.sess.ID()
	h.mu.Lock()
	holders := h.subs[uri]
	if !holders[id] {
		h.mu.Unlock()
		out.reply(jsonrpc.Response(m.ID, json.RawMessage("{}")))
		return
	}
	delete(holders, id)
	last := len(holders) == 0
	if last {
		delete(h.subs, uri)
	}
	h.mu.Unlock()
	if last {
		c.forward(m, out, nil)
		return
	}
	out.reply(jsonrpc.Response(m.ID, json.RawMessage("{}")))
}

// dropSubscriptions counts a departed session out of everything it held.
func (h *Hub) dropSubscriptions(session uint64, proc process) {
	var last []string
	h.mu.Lock()
	for uri, holders := range h.subs {
		if !holders[session] {
			continue
		}
		delete(holders, session)
		if len(holders) == 0 {
			delete(h.subs, uri)
			last = append(last, uri)
		}
	}
	h.mu.Unlock()
	for _, uri := range last {
		h.fire(proc, "resources/unsubscribe", map[string]string{"uri": uri})
	}
}

// routeUpdated sends notifications/resources/updated to the sessions
// subscribed to that URI, or to a prefix of it (a sub-resource).
func (h *Hub) routeUpdated(m *jsonrpc.Message) {
	uri, ok := uriOf(m)
	if !ok {
		return
	}
	h.mu.Lock()
	to := map[uint64]bool{}
	for sub, holders := range h.subs {
		if uri == sub || strings.HasPrefix(uri, sub) {
			for id := range holders {
				to[id] = true
			}
		}
	}
	var cs []*client
	for id := range to {
		if c := h.clients[id]; c != nil {
			cs = append(cs, c)
		}
	}
	h.mu.Unlock()
	for _, c := range cs {
		c.sess.Send(outbox.Frame{Data: m.Frame})
	}
}

// Logging.

var logRanks = map[string]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3,
	"error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

func (h *Hub) defaultLogLevel() string {
	if _, ok := logRanks[h.cfg.DefaultLogLevel]; ok {
		return h.cfg.DefaultLogLevel
	}
	return "info"
}

// setLevel records a session's log level and answers it locally.
func (c *client) setLevel(m *jsonrpc.Message, out sink) {
	var p struct {
		Level string `json:"level"`
	}
	if m.Params != nil {
		json.Unmarshal(m.Params, &p)
	}
	if _, ok := logRanks[p.Level]; !ok {
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid log level " + strconvQuote(p.Level), Reason: jsonrpc.ReasonInvalidLevel})
		return
	}
	c.mu.Lock()
	c.logLevel = p.Level
	c.mu.Unlock()
	out.reply(jsonrpc.Response(m.ID, json.RawMessage("{}")))
	c.h.updateLogLevel()
}

func (c *client) effectiveLevel(def string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.logLevel != "" {
		return c.logLevel
	}
	return def
}

// updateLogLevel sets the server to the most verbose level any session wants,
// when that changes. Nothing is sent until some session sets a level.
func (h *Hub) updateLogLevel() {
	def := h.defaultLogLevel()
	h.mu.Lock()
	explicit, agg := false, ""
	for _, c := range h.clients {
		c.mu.Lock()
		lvl, set := c.logLevel, c.logLevel != ""
		c.mu.Unlock()
		if !set {
			lvl = def
		}
		explicit = explicit || set
		if agg == "" || logRanks[lvl] < logRanks[agg] {
			agg = lvl
		}
	}
	if !explicit {
		if h.logLevel == "" {
			h.mu.Unlock()
			return
		}
		agg = def // the sessions that asked have gone: back to the default
	}
	changed := agg != h.logLevel
	h.logLevel = agg
	proc := h.proc
	h.mu.Unlock()
	if changed {
		h.log.Debug("server log level", "level", agg)
		h.fire(proc, "logging/setLevel", map[string]string{"level": agg})
	}
}

// routeLogMessage sends notifications/message to the sessions whose level
// admits it.
func (h *Hub) routeLogMessage(m *jsonrpc.Message) {
	s, ok := m.ParamsPath("level")
	var level string
	if ok {
		json.Unmarshal(m.Frame[s.Start:s.End], &level)
	}
	rank, known := logRanks[level]
	def := h.defaultLogLevel()
	for _, c := range h.readyClients() {
		if !known || logRanks[c.effectiveLevel(def)] <= rank {
			c.sess.Send(outbox.Frame{Data: m.Frame})
		}
	}
}

// Tasks.

// taskOwner is the session that created a task, and what its progress
// token maps to while the task runs.
type taskOwner struct {
	session  uint64
	up       int64           // the upstream id of the creating request, which is its progress token
	token    json.RawMessage // the session's progress token, nil if none
	terminal bool
}

// recordTask notes the task a response created, if it created one.
func (h *Hub) recordTask(session uint64, up int64, token json.RawMessage, result json.RawMessage) {
	if len(result) == 0 || result[0] != '{' {
		return
	}
	s, ok := jsonrpc.FindPath(result, "task", "taskId")
	if !ok {
		return
	}
	var id string
	if json.Unmarshal(result[s.Start:s.End], &id) != nil || id == "" {
		return
	}
	h.mu.Lock()
	h.tasks[id] = taskOwner{session: session, up: up, token: token}
	if token != nil {
		h.taskTokens[up] = id
	}
	h.mu.Unlock()
}

// ownsTask reports whether a session may name a task in tasks/get,
// tasks/result or tasks/cancel.
func (c *client) ownsTask(m *jsonrpc.Message) bool {
	s, ok := m.ParamsPath("taskId")
	if !ok {
		return false
	}
	var id string
	if json.Unmarshal(m.Frame[s.Start:s.End], &id) != nil {
		return false
	}
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	t, ok := c.h.tasks[id]
	return ok && t.session == c.sess.ID()
}

// taskProgress finds the owner of progress for a running task.
func (h *Hub) taskProgress(up int64) (uint64, json.RawMessage, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id, ok := h.taskTokens[up]
	if !ok {
		return 0, nil, false
	}
	t := h.tasks[id]
	return t.session, t.token, true
}

// taskStatus notes a terminal task: its progress token is retired.
func (h *Hub) taskStatus(m *jsonrpc.Message) {
	var p struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if m.Params == nil || json.Unmarshal(m.Params, &p) != nil {
		return
	}
	switch p.Status {
	case "completed", "failed", "cancelled":
	default:
		return
	}
	h.mu.Lock()
	if t, ok := h.tasks[p.TaskID]; ok {
		t.terminal = true
		h.tasks[p.TaskID] = t
		delete(h.taskTokens, t.up)
	}
	h.mu.Unlock()
}

// dropTasks forgets a departed session's tasks, cancelling the unfinished
// ones when the server can: no other session may read them.
func (h *Hub) dropTasks(session uint64, proc process) {
	var cancel []string
	h.mu.Lock()
	canCancel := h.init != nil && h.init.hasPath("tasks", "cancel")
	for id, t := range h.tasks {
		if t.session != session {
			continue
		}
		if !t.terminal && canCancel {
			cancel = append(cancel, id)
		}
		delete(h.tasks, id)
		delete(h.taskTokens, t.up)
	}
	h.mu.Unlock()
	for _, id := range cancel {
		h.fire(proc, "tasks/cancel", map[string]string{"taskId": id})
	}
}

// toTaskOwner sends a notification that names a task to that task's owner
// alone; false when it names none.
func (h *Hub) toTaskOwner(m *jsonrpc.Message) bool {
	id, ok := relatedTask(m)
	if !ok {
		s, found := m.ParamsPath("taskId")
		if !found || m.Method != "notifications/tasks/status" {
			return false
		}
		if json.Unmarshal(m.Frame[s.Start:s.End], &id) != nil {
			return false
		}
	}
	h.mu.Lock()
	t, known := h.tasks[id]
	c := h.clients[t.session]
	h.mu.Unlock()
	if known && c != nil {
		c.sess.Send(outbox.Frame{Data: m.Frame})
	}
	return true
}
