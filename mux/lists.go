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

	mu     sync.Mutex
	known  map[string]json.RawMessage // method -> result, legacy era
	served map[string]bool            // methods answered from known since the server was last asked them
}

func newRecollection(mem Memory, log *slog.Logger) *recollection {
	r := &recollection{mem: mem, log: log, known: map[string]json.RawMessage{}, served: map[string]bool{}}
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
	if ok {
		r.served[m.Method] = true
	}
	return result, ok
}

// takeServed is the lists answered from memory since the server was last
// asked them, which it is to be asked now.
func (r *recollection) takeServed() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	served := r.served
	r.served = map[string]bool{}
	return served
}

// asker sends a request of mcpmux's own to the started server.
type asker func(ctx context.Context, method string) (*jsonrpc.Message, error)

// refresh asks a started legacy server each list that sessions were
// answered from memory while it was not ready, and keeps the answers that
// differ. changed is the kinds ("tools", "prompts", "resources") whose
// list differed: the sessions are to be told.
func (r *recollection) refresh(ctx context.Context, info *serverInfo, ask asker) (changed []string) {
	served := r.takeServed()
	if r.lists == nil || info.era != eraLegacy || len(served) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, listRefreshTimeout)
	defer cancel()
	for _, l := range listMethods {
		if !served[l.method] || !info.has(l.capability) {
			continue
		}
		m, err := ask(ctx, l.method)
		if err != nil || m.Kind != jsonrpc.KindResult {
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
// differs. It is written to the list memory only when it differs, so a
// session's list answer costs a comparison.
func (r *recollection) learn(method string, result json.RawMessage) (differs bool) {
	result = bytes.Clone(result) // the answer's frame is the reader's
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
	out.reply(jsonrpc.Response(m.ID, c.h.view.load().filterResult(m.Method, result)))
	return true
}

// listObserver is what learns, from a legacy server's answer to a
// session's list request (the first page), the list to remember; nil when
// the request is no such list or no list memory is kept.
func (c *client) listObserver(m *message) func(*jsonrpc.Message) {
	if c.h.memo.lists == nil || !isListMethod(m.Method) {
		return nil
	}
	if _, paged := m.ParamsPath("cursor"); paged {
		return nil
	}
	method := m.Method
	return func(ans *jsonrpc.Message) {
		info := c.h.describedServer()
		if ans == nil || ans.Kind != jsonrpc.KindResult || info == nil || info.era != eraLegacy {
			return
		}
		c.h.memo.learn(method, ans.Result)
	}
}

func isListMethod(method string) bool {
	for _, l := range listMethods {
		if l.method == method {
			return true
		}
	}
	return false
}
