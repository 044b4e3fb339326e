package mux

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// logRanks orders the MCP log levels, most verbose first.
var logRanks = map[string]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3,
	"error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// logNames are the MCP log levels by rank.
var logNames = [...]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// logLevels keeps the level each session set with logging/setLevel and the
// one the server was last sent. Invariant: sent is "" until some session has
// set a level; from then on it is the most verbose level any session wants
// (a session that set none wants the default).
type logLevels struct {
	def string // the level of a session that set none

	mu        sync.Mutex
	bySession map[uint64]string
	count     [len(logNames)]int // sessions in bySession at each rank: the most verbose is found without a walk
	sent      string
}

func newLogLevels(def string) logLevels {
	if _, ok := logRanks[def]; !ok {
		def = DefaultSessionLogLevel
	}
	return logLevels{def: def, bySession: make(map[uint64]string)}
}

// set records a session's level; false when it had that level already.
func (l *logLevels) set(session uint64, level string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.bySession[session]
	if ok && old == level {
		return false
	}
	if ok {
		l.count[logRanks[old]]--
	}
	l.bySession[session] = level
	l.count[logRanks[level]]++
	return true
}

func (l *logLevels) drop(session uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.bySession[session]; ok {
		l.count[logRanks[old]]--
		delete(l.bySession, session)
	}
}

// explicit is the level a session set, if it set one.
func (l *logLevels) explicit(session uint64) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lvl, ok := l.bySession[session]
	return lvl, ok
}

// of is a session's level: its own, or the default.
func (l *logLevels) of(session uint64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lvl, ok := l.bySession[session]; ok {
		return lvl
	}
	return l.def
}

// upstream works out the level the server should have, given how many
// sessions there are; send is true when that is not what it was last sent.
func (l *logLevels) upstream(sessions int) (level string, send bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bySession) == 0 {
		if l.sent == "" {
			return "", false // nobody ever asked: the server keeps its own
		}
		level = l.def // the sessions that asked have gone
	} else {
		level = l.mostVerboseLocked(sessions > len(l.bySession))
	}
	send = level != l.sent
	l.sent = level
	return level, send
}

func (l *logLevels) mostVerboseLocked(withDefault bool) string {
	agg := ""
	if withDefault {
		agg = l.def
	}
	for rank, n := range l.count {
		if n > 0 && (agg == "" || rank < logRanks[agg]) {
			return logNames[rank]
		}
	}
	return agg
}

// last is the level the server was last sent; "" none.
func (l *logLevels) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
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
		c.fail(out, m.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid log level " + strconv.Quote(p.Level), Reason: jsonrpc.ReasonInvalidLevel})
		return
	}
	c.h.levels.set(c.sess.ID(), p.Level)
	out.reply(jsonrpc.Response(m.ID, emptyResult))
	c.h.updateLogLevel()
}

// updateLogLevel sets the server to the most verbose level any session
// wants, when that changes.
func (h *Hub) updateLogLevel() {
	info := h.describedServer()
	if info != nil && info.era == eraModern && info.newestLegacy() == "" {
		return // a modern server gets each request's level in its envelope
	}
	level, send := h.levels.upstream(h.sessions.len())
	if !send {
		return
	}
	h.log.Debug("server log level", "level", level)
	params := map[string]any{"level": level}
	if info != nil && info.era == eraModern {
		// A server of both eras serves legacy sessions' requests in their
		// own revision, which reads no level from the envelope: it is set
		// one as a legacy server is, in the newest legacy revision it lists.
		params["_meta"] = map[string]string{protocol.MetaProtocolVersion: info.newestLegacy()}
	}
	h.fire(h.life.current(), "logging/setLevel", params)
}

// setLevelBefore is updateLogLevel for a request that is about to go to
// the server and wants the new level: it waits (briefly) for the server to
// take the level, because a server may handle the two concurrently.
func (h *Hub) setLevelBefore(c *client) {
	level, send := h.levels.upstream(h.sessions.len())
	proc := h.life.current()
	if !send || proc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, setLevelWait)
	defer cancel()
	if _, err := h.call(ctx, proc, "logging/setLevel", map[string]string{"level": level}); err != nil {
		c.sess.Logger().Debug("the server did not take the log level in time", "level", level, "error", err)
	}
}

// setLevelWait bounds how long a request waits for the server to take the
// log level it asked for.
const setLevelWait = 2 * time.Second

// routeLogMessage sends notifications/message to the sessions whose level
// admits it. A message whose _meta names the request it is about (by the
// progress token mcpmux gave that request) goes to that request's session
// alone. Any other: on a legacy server, to the legacy sessions by the level
// each set; and to the one session whose request in flight asked, in its
// envelope, for a level that admits it (a modern server sends messages for
// nothing else). Such a message names no request: of several that asked,
// the latest takes it.
func (u *upstreamHandler) routeLogMessage(m *message) {
	h := u.h
	level, _ := m.paramString(pLevel)
	rank, known := logRanks[level]
	if toRelatedRequest(h, m, rank, known) {
		return
	}
	info := h.describedServer()
	// A legacy server, and a server of both eras that serves legacy
	// sessions in their own revision, log at the level their connection was
	// set (logging/setLevel): what they log goes to every legacy session
	// whose level admits it, as a legacy server's connection would send it.
	connection := info == nil || info.era != eraModern || info.newestLegacy() != ""
	if connection {
		for _, c := range h.sessions.ready() {
			if !known || logRanks[h.levels.of(c.sess.ID())] <= rank {
				c.send(m.Frame)
			}
		}
	}
	_, r, ok := h.flights.latest(func(r idmap.Route) bool {
		d := dataOf(r)
		// Only a modern session's request, or a legacy session's bridged up,
		// carries a level; the legacy sessions had theirs above.
		return d != nil && d.level != "" && !d.listen && (!connection || d.modern != nil) && (!known || logRanks[d.level] <= rank)
	})
	if !ok {
		return
	}
	if c := h.sessions.get(r.Session); c != nil {
		c.sendAbout(r.Tag, m.Frame)
	}
}

// toRelatedRequest sends a log message whose _meta names its request, by
// the progress token mcpmux gave it, to that request's session, with the
// session's own token, if the level the request (or, for a legacy session,
// the session) asked for admits it; false when the message names no
// request of mcpmux's. A message about a request no longer in flight is
// dropped, as its progress would be.
func toRelatedRequest(h *Hub, m *message, rank int, known bool) bool {
	span, ok := m.p.inMeta(mProgressToken)
	if !ok {
		return false
	}
	up, ok := upstreamID(m.Frame[span.Start:span.End])
	if !ok {
		return false // not a token mcpmux gave: routed as a message that names none
	}
	r, ok := h.flights.get(up)
	c := h.sessions.get(r.Session)
	switch {
	case !ok || c == nil || r.Token == nil:
		h.log.Debug("dropped a log message about a request not in flight", "request", up)
	case logAdmits(h, r, rank, known):
		c.sendAbout(r.Tag, jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: span, Value: r.Token}))
	}
	return true
}

// logAdmits: a message of rank reaches the session of r. A modern request
// gets messages only at the level its envelope asked for (none if it asked
// for none); a legacy session's, at the level the session set.
func logAdmits(h *Hub, r idmap.Route, rank int, known bool) bool {
	want := h.levels.of(r.Session)
	if d := dataOf(r); d != nil && d.level != "" {
		want = d.level
	} else if d != nil && d.modern != nil {
		return false
	}
	return !known || logRanks[want] <= rank
}
