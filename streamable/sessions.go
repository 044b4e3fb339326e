package streamable

import (
	"net/http"
	"time"

	"github.com/mcpmux/mcpmux/session"
)

// admit starts a session for an initialize request, or for the record of
// an earlier daemon's (rec.ID set): 503 when the server is full, when
// every one of the Handler's MaxSessions sessions has a request in flight,
// or when the handler is closing. At MaxSessions the session idle for
// longest is ended to make room: HTTP sessions that clients never delete
// must not keep the server from others.
func (h *Handler) admit(r *http.Request, server string, ep Endpoint, rec Record) (*transport, *refusal) {
	if ep.Full() {
		return nil, errFull
	}
	budget := &replayBudget{daemon: &h.replayKept, sessionMax: h.cfg.ReplaySessionBytes, daemonMax: h.cfg.ReplayBytes}
	t := newTransport(rec.ID, server, h.cfg.SessionIdle, h.cfg.WriteTimeout, budget, h.cfg.MaxInflight)
	if rec.ID != "" {
		t.renumber()
	}
	if h.cfg.Store != nil {
		rec.ID, rec.Server = t.id, server
		t.memo, t.log = newMemo(h.cfg.Store, rec, h.cfg.SessionIdle), h.log
	}
	t.expire = func() {
		h.end(t)
		h.log.Debug("HTTP session expired", "server", server, "http_session", t.id, "idle", h.cfg.SessionIdle)
	}
	if h.cfg.Store != nil && h.cfg.SessionDormant < h.cfg.SessionIdle {
		t.dormant = h.cfg.SessionDormant
		t.sleep = func() {
			t.asleep.Store(true)
			h.forget(t)
			h.nap(t.id, server)
			t.Close()
			h.log.Info("HTTP session dormant: it never opened a GET stream and was idle, so what it held on its server is let go; it is made again if its client comes back",
				"server", server, "http_session", t.id, "http_session_dormant", h.cfg.SessionDormant)
		}
	}
	for {
		victim, f := h.register(t)
		if f != nil {
			return nil, f
		}
		if victim == nil {
			break
		}
		since, _ := victim.idleSince()
		h.log.Info("evicted the idlest HTTP session to make room (max_http_sessions)", "server", victim.server,
			"http_session", victim.id, "idle", time.Since(since).Round(time.Second), "max_http_sessions", h.cfg.MaxSessions)
		h.end(victim)
	}
	// The session outlives this request; Close ends it.
	peer := session.Peer{Transport: "http", Addr: r.RemoteAddr, Dir: rec.Folder}
	go func() { // owned by Close, which waits on h.active
		defer h.active.Done()
		err := ep.Serve(h.ctx, t, peer)
		h.end(t)
		h.log.Debug("HTTP session ended", "server", server, "peer", peer.Addr, "error", err)
	}()
	return t, nil
}

// register adds a session, counted in h.active. At MaxSessions it adds
// nothing and names the session to evict first (nil with a refusal when
// every session is busy, or the handler is closing).
func (h *Handler) register(t *transport) (victim *transport, f *refusal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil, errShuttingDown
	}
	if len(h.sessions) >= h.cfg.MaxSessions {
		if victim = h.idlestLocked(); victim == nil {
			return nil, errHTTPFull
		}
		return victim, nil
	}
	h.sessions[t.id] = t
	h.active.Add(1)
	return nil, nil
}

// idlestLocked is the session without a request in flight for longest;
// nil when each has one.
func (h *Handler) idlestLocked() *transport {
	var best *transport
	var bestSince time.Time
	for _, t := range h.sessions {
		since, idle := t.idleSince()
		if idle && (best == nil || since.Before(bestSince)) {
			best, bestSince = t, since
		}
	}
	return best
}
