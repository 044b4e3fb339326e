package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// memory is what a legacy client said to set up its session (its last
// initialize, its notifications/initialized, its log level, its
// subscriptions), which a new session must hear again for the client to
// go on as if nothing happened. A modern client (its first request carried
// the 2026-07-28 envelope) sets nothing up: each request says it all.
// The stdin reader notes what goes out; the socket readers note the
// protocol version the client was answered with.
type memory struct {
	awaitInit atomic.Bool // an initialize is out and its answer not seen
	known     atomic.Bool // decided, for the stdin reader's scan

	mu          sync.Mutex
	decided     bool // the era is known
	modern      bool
	initialize  []byte            // the client's last initialize request
	initID      string            // its id
	initialized []byte            // the client's notifications/initialized
	level       []byte            // the params of its last logging/setLevel
	subs        map[string][]byte // the params of each resources/subscribe not unsubscribed, by URI
	version     string            // the protocol version the client was answered with
}

// noteSent notes what a line from the client sets up.
func (m *memory) noteSent(msgs []*jsonrpc.Message) {
	for _, msg := range msgs {
		if msg.Kind != jsonrpc.KindRequest && msg.Kind != jsonrpc.KindNotification {
			continue
		}
		switch msg.Method {
		case "initialize", "notifications/initialized", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		default:
			if msg.Kind == jsonrpc.KindRequest && msg.Method != "ping" {
				m.decide(msg)
			}
			continue
		}
		m.note(msg)
	}
}

// decide settles the client's era at its first request (ping aside).
func (m *memory) decide(msg *jsonrpc.Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.decided {
		return
	}
	_, m.modern = msg.ParamsPath("_meta", protocol.MetaProtocolVersion)
	m.decided = true
	m.known.Store(true)
}

// setsUp are the methods whose messages memory notes, and the
// cancellation the tracker reads: the stdin reader parses their lines.
var setsUp = [...]string{"initialize", "notifications/initialized", "logging/setLevel",
	"resources/subscribe", "resources/unsubscribe", "notifications/cancelled"}

// mustParse reports whether the client's line s scanned must be parsed:
// it is a batch, the scan could not read it, it sets the session up or
// cancels a request, or it is the request that decides the client's era.
func (m *memory) mustParse(s *frameScan) bool {
	if s.odd || s.batch {
		return true
	}
	if !s.hasMethod {
		return false // an answer to the server, or not a message: nothing to note
	}
	for _, name := range setsUp {
		if s.methodIs(name) {
			return true
		}
	}
	return s.hasID && (string(s.idOf()) == "null" || !m.known.Load() && !s.methodIs("ping"))
}

// isInitAnswer reports whether an answer with id may be the one to the
// client's initialize, whose version noteAnswer reads.
func (m *memory) isInitAnswer(id []byte) bool {
	if !m.awaitInit.Load() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return string(id) == m.initID
}

// answered notes that the answer with id passed unread (it was streamed):
// if it was the initialize's, its version stays unknown.
func (m *memory) answered(id []byte) {
	if m.isInitAnswer(id) {
		m.awaitInit.Store(false)
	}
}

func (m *memory) note(msg *jsonrpc.Message) {
	if msg.Method != "notifications/initialized" && msg.Kind == jsonrpc.KindRequest {
		m.decide(msg)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.modern {
		return
	}
	switch msg.Method {
	case "initialize":
		m.initialize, m.initID = frameOf(msg), string(msg.ID)
		m.awaitInit.Store(true)
	case "notifications/initialized":
		m.initialized = frameOf(msg)
	case "logging/setLevel":
		m.level = bytes.Clone(msg.Params)
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return
		}
		if m.subs == nil {
			m.subs = map[string][]byte{}
		}
		if msg.Method == "resources/subscribe" {
			m.subs[p.URI] = bytes.Clone(msg.Params)
		} else {
			delete(m.subs, p.URI)
		}
	}
}

// frameOf is a copy of a message's frame without its line ending.
func frameOf(msg *jsonrpc.Message) []byte {
	return bytes.Clone(bytes.TrimRight(msg.Frame, "\r\n"))
}

// noteAnswer notes the version of the answer to the client's initialize.
func (m *memory) noteAnswer(msg *jsonrpc.Message) {
	if !m.awaitInit.Load() || msg.Kind != jsonrpc.KindResult {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if string(msg.ID) != m.initID {
		return
	}
	m.awaitInit.Store(false)
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(msg.Result, &r) == nil {
		m.version = r.ProtocolVersion
	}
}

// setup is what memory holds, for one replay.
type setup struct {
	initialize  []byte
	initialized []byte
	level       []byte
	subs        [][]byte
	version     string
}

func (m *memory) setup() setup {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := setup{initialize: m.initialize, initialized: m.initialized, level: m.level, version: m.version}
	for _, uri := range slices.Sorted(maps.Keys(m.subs)) {
		s.subs = append(s.subs, m.subs[uri])
	}
	return s
}

// replayID is an id of the bridge's own for a replayed request.
func (b *bridge) replayID() []byte {
	b.replays++
	return []byte(strconv.Quote("mcpmux-connect-replay-" + strconv.Itoa(b.replays)))
}

// replay sets a new link up as the client had set up the lost one: its
// initialize goes first, with an id of the bridge's, and the answer is
// awaited and kept from the client; then its notifications/initialized,
// its log level and its subscriptions, whose answers the socket reader
// swallows. The link is told which lists to report changed.
func (b *bridge) replay(ctx context.Context, l *link) error {
	s := b.mem.setup()
	if s.initialize == nil {
		return nil // a modern client, or one that has set nothing up yet
	}
	init, err := jsonrpc.Parse(s.initialize)
	if err != nil {
		return err
	}
	id := b.replayID()
	l.write(append(init.WithID(id), '\n'))
	l.flush()
	answer, err := awaitAnswer(ctx, l, id)
	if err != nil {
		return fmt.Errorf("replay initialize on %s: %w", l.path, err)
	}
	if answer.Kind == jsonrpc.KindError {
		return fmt.Errorf("replay initialize on %s: the daemon answered %s", l.path, answer.Error)
	}
	var r struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(answer.Result, &r); err != nil {
		return fmt.Errorf("replay initialize on %s: %w", l.path, err)
	}
	if s.version != "" && r.ProtocolVersion != s.version {
		fmt.Fprintf(b.stderr, "mcpmux: warning: the new session speaks protocol %s, the client was told %s\n", r.ProtocolVersion, s.version)
	}
	for _, kind := range []string{"tools", "prompts", "resources"} {
		if _, ok := r.Capabilities[kind]; ok {
			l.changed = append(l.changed, kind)
		}
	}
	if s.initialized != nil {
		l.write(append(slices.Clip(s.initialized), '\n'))
	}
	if s.level != nil {
		b.replayRequest(l, "logging/setLevel", s.level)
	}
	for _, p := range s.subs {
		b.replayRequest(l, "resources/subscribe", p)
	}
	l.flush()
	return nil
}

// replayRequest sends a request of the client's again under an id of the
// bridge's, whose answer the socket reader swallows.
func (b *bridge) replayRequest(l *link, method string, params []byte) {
	id := b.replayID()
	frame, err := jsonrpc.Request(id, method, json.RawMessage(params))
	if err != nil {
		return
	}
	l.swallow[string(id)] = true
	l.write(append(frame, '\n'))
}

// awaitAnswer reads the link until the answer to id, before its socket
// reader starts; what comes before it is not the client's. A refusal of
// the session is a *refusal.
func awaitAnswer(ctx context.Context, l *link, id []byte) (*jsonrpc.Message, error) {
	if deadline, ok := ctx.Deadline(); ok {
		l.conn.SetReadDeadline(deadline)
	} else {
		l.conn.SetReadDeadline(time.Now().Add(autostartTimeout))
	}
	defer l.conn.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { l.conn.SetReadDeadline(time.Now()) })
	defer stop()
	lr := lineReader{br: l.br}
	for {
		p, err := lr.next()
		if err != nil {
			return nil, err
		}
		if !p.whole {
			continue
		}
		m, err := jsonrpc.Parse(p.data)
		if err != nil {
			continue
		}
		if r := refusalOf(m); r != nil {
			return nil, r
		}
		if (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && bytes.Equal(m.ID, id) {
			return m, nil
		}
	}
}

// refusalOf is the daemon's refusal of the session when m is one: an error
// with id null whose reason is too_many_sessions.
func refusalOf(m *jsonrpc.Message) *refusal {
	if m.Kind != jsonrpc.KindError || string(m.ID) != "null" {
		return nil
	}
	var e struct {
		Message string `json:"message"`
		Data    struct {
			Reason string `json:"reason"`
		} `json:"data"`
	}
	if json.Unmarshal(m.Error, &e) != nil || e.Data.Reason != jsonrpc.ReasonTooManySessions {
		return nil
	}
	return &refusal{frame: frameOf(m), message: e.Message, reason: e.Data.Reason}
}
