package streamable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// sinkTag is the tag of what mcpmux sends a restored session itself
// (the client's log level and subscriptions, again): their answers name
// no stream, and are dropped.
const sinkTag = ^uint64(0)

// restoreTimeout bounds the wait for the answer to a replayed initialize.
const restoreTimeout = 2 * time.Minute

// memo is what a client set up on its session, kept in the Handler's
// Store as it changes, so that a later daemon can set the session up
// again.
type memo struct {
	store Store
	every time.Duration // how often Touch is worth a write

	mu      sync.Mutex
	rec     Record
	touched time.Time
}

func newMemo(store Store, rec Record, idle time.Duration) *memo {
	return &memo{store: store, rec: rec, every: min(time.Minute, idle/4), touched: time.Now()}
}

// note keeps what msg, delivered to the session, sets up; false when it
// sets nothing up. The record is saved once there is an initialize.
func (m *memo) note(msg *jsonrpc.Message) (saved bool, err error) {
	if m == nil || (msg.Kind != jsonrpc.KindRequest && msg.Kind != jsonrpc.KindNotification) {
		return false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch msg.Method {
	case "initialize":
		m.rec.Initialize = json.RawMessage(msg.Frame)
	case "notifications/initialized":
		m.rec.Initialized = true
	case "logging/setLevel":
		m.rec.Level = json.RawMessage(msg.Params)
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return false, nil
		}
		if msg.Method == "resources/unsubscribe" {
			delete(m.rec.Subscriptions, p.URI)
		} else {
			if m.rec.Subscriptions == nil {
				m.rec.Subscriptions = map[string]json.RawMessage{}
			}
			m.rec.Subscriptions[p.URI] = json.RawMessage(msg.Params)
		}
	default:
		return false, nil
	}
	if len(m.rec.Initialize) == 0 {
		return false, nil
	}
	return true, m.saveLocked()
}

// saveLocked writes a copy of the record; m.mu is held.
func (m *memo) saveLocked() error {
	rec := m.rec
	rec.Initialize = slices.Clone(rec.Initialize)
	rec.Level = slices.Clone(rec.Level)
	rec.Subscriptions = maps.Clone(rec.Subscriptions)
	m.touched = time.Now()
	return m.store.Save(&rec)
}

// keepFolder notes the folder the session's roots told; the record is
// saved now if it has its initialize, else with it.
func (m *memo) keepFolder(dir string) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rec.Folder = dir
	if len(m.rec.Initialize) == 0 {
		return nil
	}
	return m.saveLocked()
}

// touch notes a request on the session in the store, at most once every
// so often.
func (m *memo) touch() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rec.Initialize) == 0 || time.Since(m.touched) < m.every {
		return
	}
	m.touched = time.Now()
	m.store.Touch(m.rec.ID)
}

// remember notes what a delivered POST body sets up, logging a record
// that cannot be written.
func (h *Handler) remember(t *transport, b *body) {
	if b.batch || b.msg == nil || t.memo == nil {
		return
	}
	switch b.msg.Method {
	case "initialize", "notifications/initialized", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
	default:
		return // nothing to keep: no copy of a large call
	}
	// Frames the session took are its own from now on: keep copies.
	msg := *b.msg
	msg.Frame = slices.Clone(b.frame)
	msg.Params = slices.Clone(b.msg.Params)
	if _, err := t.memo.note(&msg); err != nil {
		h.log.Warn("cannot keep the HTTP session for after a restart", "server", t.server, "http_session", t.id, "error", err)
	}
}

// restore makes the session that id names again, from its record, for a
// client that comes back after the daemon restarted; one restore per id
// at a time, the others wait for it. errNoSession when there is no
// record (or it expired), or the session cannot be set up again.
func (h *Handler) restore(r *http.Request, id, server string, ep Endpoint) (*transport, *refusal) {
	for {
		done, mine := h.restoring(id)
		if mine {
			defer h.restored(id, done)
			if t := h.lookup(id); t != nil { // restored while this one waited
				if t.server != server || t.closed() {
					return nil, errNoSession
				}
				return t, nil
			}
			return h.restoreRecord(r, id, server, ep)
		}
		select {
		case <-done:
		case <-r.Context().Done():
			return nil, errClientLeft
		}
		if t := h.lookup(id); t != nil && t.server == server && !t.closed() {
			return t, nil
		}
	}
}

// restoring claims the restore of id: mine when this caller is to do it;
// otherwise done closes when the one under way ends.
func (h *Handler) restoring(id string) (done chan struct{}, mine bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := h.pending[id]; d != nil {
		return d, false
	}
	d := make(chan struct{})
	h.pending[id] = d
	return d, true
}

func (h *Handler) restored(id string, done chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pending, id)
	close(done)
}

func (h *Handler) restoreRecord(r *http.Request, id, server string, ep Endpoint) (*transport, *refusal) {
	rec, err := h.cfg.Store.Load(id)
	if err != nil || rec.Server != server {
		return nil, errNoSession
	}
	t, f := h.admit(r, server, ep, *rec)
	if f != nil {
		return nil, f
	}
	if err := h.replay(r.Context(), t, rec); err != nil {
		h.log.Info("could not set an HTTP session up again after a restart; its client must initialize again",
			"server", server, "http_session", id, "error", err)
		h.end(t)
		return nil, errNoSession
	}
	h.log.Info("HTTP session set up again after a restart", "server", server, "http_session", id, "peer", r.RemoteAddr)
	return t, nil
}

// replay hands the session the client's initialize under an id of
// mcpmux's, waits for its answer and keeps it from the client, then its
// notifications/initialized, its log level and its subscriptions, whose
// answers are dropped.
func (h *Handler) replay(ctx context.Context, t *transport, rec *Record) error {
	init, err := jsonrpc.Parse(rec.Initialize)
	if err != nil || init.Kind != jsonrpc.KindRequest || init.Method != "initialize" {
		return errors.New("the kept initialize is not an initialize request")
	}
	st := t.openPOST()
	defer t.drop(st)
	if err := t.deliver(ctx, init.WithID([]byte(`"mcpmux-http-restore"`)), st.no); err != nil {
		return err
	}
	timer := time.NewTimer(restoreTimeout)
	defer timer.Stop()
	select {
	case <-st.over:
	case <-t.done:
		return errSessionGone
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("no answer to initialize in %s", restoreTimeout)
	}
	ans, err := jsonrpc.Parse(st.last())
	if err != nil || ans.Kind != jsonrpc.KindResult {
		return fmt.Errorf("initialize answered %s", st.last())
	}
	var frames [][]byte
	if rec.Initialized {
		frames = append(frames, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	}
	n := 0
	request := func(method string, params json.RawMessage) {
		n++
		if f, err := jsonrpc.Request(json.RawMessage(strconv.Quote("mcpmux-http-restore-"+strconv.Itoa(n))), method, params); err == nil {
			frames = append(frames, f)
		}
	}
	if rec.Level != nil {
		request("logging/setLevel", rec.Level)
	}
	for _, uri := range slices.Sorted(maps.Keys(rec.Subscriptions)) {
		request("resources/subscribe", rec.Subscriptions[uri])
	}
	for _, f := range frames {
		if err := t.deliver(ctx, f, sinkTag); err != nil {
			return err
		}
	}
	return nil
}
