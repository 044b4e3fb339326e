package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// ListMemory is what a Memory may also keep: the server's last answer to
// each of its lists (tools/list, prompts/list, resources/list,
// resources/templates/list). A Memory that has it lets sessions be
// answered their lists at once while the server starts, as they are their
// initialize.
type ListMemory interface {
	// List is the result of the server's last answer to method, in era
	// ("legacy"); nil when none is kept.
	List(method string) (era string, result []byte)
	// RememberList keeps a new one; an error is the caller's to log.
	RememberList(method, era string, result []byte) error
}

// listMethods are the lists kept, each with the capability that offers it.
var listMethods = []struct{ method, capability string }{
	{"tools/list", "tools"},
	{"prompts/list", "prompts"},
	{"resources/list", "resources"},
	{"resources/templates/list", "resources"},
}

// listRefreshTimeout bounds how long a started server is asked its lists
// before its sessions are served by its supervisor again.
const listRefreshTimeout = 10 * time.Second

// recollection is what the hub holds of Memory: it recalls the server's
// description into life, keeps a new one, and keeps the server's lists
// (first pages, legacy era) to answer sessions from while the server is
// not ready. Invariant: known holds what the list memory holds, as last
// read or written by this hub.
type recollection struct {
	mem   Memory     // nil: nothing is kept
	lists ListMemory // nil: lists are not kept
	log   *slog.Logger

	mu    sync.Mutex
	known map[string]json.RawMessage // method -> result, legacy era
}

func newRecollection(mem Memory, log *slog.Logger) *recollection {
	r := &recollection{mem: mem, log: log, known: map[string]json.RawMessage{}}
	if lm, ok := mem.(ListMemory); ok && lm != nil {
		r.lists = lm
		for _, l := range listMethods {
			if era, result := lm.List(l.method); result != nil && era == eraLegacy.String() && json.Valid(result) {
				r.known[l.method] = result
			}
		}
	}
	return r
}

// recall takes the server's description from Memory, if it keeps one
// that the configured protocol allows: sessions are answered from it
// until the server has started and said otherwise.
func (r *recollection) recall(protocol string, l *life) {
	if r.mem == nil {
		return
	}
	era, raw := r.mem.Description()
	if raw == nil {
		return
	}
	info, err := parseRemembered(era, raw)
	switch {
	case err != nil:
		r.log.Warn("ignoring the remembered description of the server", "error", err)
	case !protocolAllows(protocol, info.era):
		r.log.Debug("ignoring the remembered description of the server: another era than the configured protocol", "era", info.era, "protocol", protocol)
	default:
		l.remember(info)
	}
}

// keep gives Memory a description that differs from what it had.
func (r *recollection) keep(prev, info *serverInfo) {
	if r.mem == nil || (prev != nil && prev.same(info)) {
		return
	}
	if err := r.mem.RememberDescription(info.era.String(), info.result); err != nil {
		r.log.Warn("could not remember the server's description", "error", err)
	}
}

// answer is the remembered result of a list request that asks for the
// first page; false when it is not a list, asks for a later page, or
// nothing is remembered of it.
func (r *recollection) answer(m *message) (json.RawMessage, bool) {
	if _, paged := m.ParamsPath("cursor"); paged {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	result, ok := r.known[m.Method]
	return result, ok
}

// asker sends a request of mcpmux's own to the started server.
type asker func(ctx context.Context, method string) (*jsonrpc.Message, error)

// refresh asks a started legacy server each list its description offers,
// and keeps the answers that differ from what was known. changed is the
// kinds ("tools", "prompts", "resources") whose known list differed: the
// sessions may have been answered from it.
func (r *recollection) refresh(ctx context.Context, info *serverInfo, ask asker) (changed []string) {
	if r.lists == nil || info.era != eraLegacy {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, listRefreshTimeout)
	defer cancel()
	for _, l := range listMethods {
		if !info.has(l.capability) {
			continue
		}
		m, err := ask(ctx, l.method)
		if err != nil || m.Kind != jsonrpc.KindResult || !json.Valid(m.Result) {
			r.log.Debug("server did not list; its list is not remembered", "method", l.method, "error", err)
			continue
		}
		if r.learn(l.method, m.Result) {
			changed = appendKind(changed, l.capability)
		}
	}
	return changed
}

// learn keeps a list the server gave; true when one was known and it
// differs.
func (r *recollection) learn(method string, result json.RawMessage) (differs bool) {
	var compact bytes.Buffer
	if json.Compact(&compact, result) != nil {
		return false
	}
	result = compact.Bytes()
	prev, had := r.swap(method, result)
	if had && bytes.Equal(prev, result) {
		return false
	}
	if err := r.lists.RememberList(method, eraLegacy.String(), result); err != nil {
		r.log.Warn("could not remember the server's list", "method", method, "error", err)
	}
	return had
}

// swap sets the known list of method, and returns the one before.
func (r *recollection) swap(method string, result json.RawMessage) (prev json.RawMessage, had bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, had = r.known[method]
	r.known[method] = result
	return prev, had
}

func appendKind(kinds []string, kind string) []string {
	for _, k := range kinds {
		if k == kind {
			return kinds
		}
	}
	return append(kinds, kind)
}

// listFromMemory answers a legacy session's list request from what is
// remembered of a legacy server that is not ready (starting, restarting,
// idle or failed): true when it did. The session does not want the server
// for it.
func (c *client) listFromMemory(m *message, info *serverInfo, out sink) bool {
	if info == nil || info.era != eraLegacy {
		return false
	}
	if _, _, ready := c.h.life.readyNow(); ready {
		return false
	}
	result, ok := c.h.memo.answer(m)
	if !ok {
		return false
	}
	c.sess.Logger().Debug("answered a list from memory: the server is not ready", "method", m.Method)
	out.reply(jsonrpc.Response(m.ID, result))
	return true
}
