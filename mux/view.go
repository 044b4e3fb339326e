package mux

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// ToolView is a view of a server's tools: Allow and Deny are globs ('*'
// any run of characters, none included, '?' any one character) over tool
// names. A tool is visible when it matches no Deny glob and, if Allow is
// not empty, an Allow glob. The zero value shows every tool. The router
// applies a server's view (Config.Tools) to every session; the endpoints
// apply theirs to the prefixed names with the same matching.
type ToolView struct{ Allow, Deny []string }

// liveView is a hub's tool view, which a reload may change while sessions
// run (Hub.SetTools): each use loads the view of the moment.
type liveView struct{ p atomic.Pointer[ToolView] }

func newLiveView(v ToolView) *liveView {
	lv := new(liveView)
	lv.p.Store(&v)
	return lv
}

func (lv *liveView) load() ToolView { return *lv.p.Load() }

// swap sets the view; false when it was that already.
func (lv *liveView) swap(v ToolView) (changed bool) {
	old := lv.p.Swap(&v)
	return !slices.Equal(old.Allow, v.Allow) || !slices.Equal(old.Deny, v.Deny)
}

// SetTools gives the server another tool view (a reload changed
// allow_tools or deny_tools), for every session at once; the sessions are
// told that their tools changed, and list them again through the new view.
// The lists kept need nothing forgotten: they are the server's whole ones.
func (h *Hub) SetTools(v ToolView) {
	if !h.view.swap(v) {
		return
	}
	h.log.Info("tool view changed; telling the sessions", "allow_tools", v.Allow, "deny_tools", v.Deny)
	if info := h.describedServer(); info != nil {
		h.listsChanged(info, []string{"tools"})
	}
}

// empty reports that the view hides nothing.
func (v ToolView) empty() bool { return len(v.Allow) == 0 && len(v.Deny) == 0 }

// Visible reports whether the tool of that name is in the view.
func (v ToolView) Visible(name string) bool {
	match := func(g string) bool { return glob(g, name) }
	if slices.ContainsFunc(v.Deny, match) {
		return false
	}
	return len(v.Allow) == 0 || slices.ContainsFunc(v.Allow, match)
}

// refusal is the error for a tools/call of a tool the view hides, or nil:
// the call never reaches the server.
func (v ToolView) refusal(m *message) *jsonrpc.Error {
	if v.empty() || m.Method != "tools/call" {
		return nil
	}
	name, ok := m.paramString(pName)
	if !ok || v.Visible(name) {
		return nil // no name, or not a string: the server's to refuse
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name), Reason: jsonrpc.ReasonUnknownTool}
}

// filter is a tools/list result without the hidden tools; ok is false
// when it is unchanged (nothing hidden, or not a list it can read).
func (v ToolView) filter(result json.RawMessage) (out json.RawMessage, ok bool) {
	if v.empty() || len(result) == 0 {
		return nil, false
	}
	var r map[string]json.RawMessage
	if json.Unmarshal(result, &r) != nil {
		return nil, false
	}
	var tools []json.RawMessage
	if json.Unmarshal(r["tools"], &tools) != nil {
		return nil, false
	}
	kept := slices.DeleteFunc(slices.Clone(tools), func(t json.RawMessage) bool {
		var named struct {
			Name string `json:"name"`
		}
		return json.Unmarshal(t, &named) == nil && !v.Visible(named.Name)
	})
	if len(kept) == len(tools) {
		return nil, false
	}
	if kept == nil {
		kept = []json.RawMessage{}
	}
	r["tools"], _ = json.Marshal(kept)
	out, err := json.Marshal(r)
	return out, err == nil
}

// filterResult is the result of an answer to method as the view lets a
// session see it: result itself, or a new one without the hidden tools.
func (v ToolView) filterResult(method string, result json.RawMessage) json.RawMessage {
	if method != "tools/list" {
		return result
	}
	if out, ok := v.filter(result); ok {
		return out
	}
	return result
}

// filterAnswer is the server's answer m to a session's request of method
// as the view lets the session see it: m itself, or a new message without
// the hidden tools. What the hub keeps of the server's lists is what the
// server said; the view applies when a session is answered, so a view that
// changes needs no list forgotten.
func (v ToolView) filterAnswer(method string, m *jsonrpc.Message) *jsonrpc.Message {
	if method != "tools/list" || m.Kind != jsonrpc.KindResult {
		return m
	}
	result, ok := v.filter(m.Result)
	if !ok {
		return m
	}
	nm, err := jsonrpc.Parse(jsonrpc.Response(m.ID, result))
	if err != nil {
		return m
	}
	return nm
}

// glob reports whether name matches pattern, where '*' stands for any run
// of characters (none included) and '?' for any one character.
func glob(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// The last '*' seen, and where in name its run would end next.
	star, next := -1, 0
	i, j := 0, 0
	for j < len(n) {
		switch {
		case i < len(p) && (p[i] == '?' || p[i] == n[j]):
			i++
			j++
		case i < len(p) && p[i] == '*':
			star, next = i, j
			i++
		case star >= 0:
			next++
			i, j = star+1, next
		default:
			return false
		}
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}
