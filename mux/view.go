package mux

import (
	"encoding/json"
	"slices"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// toolView is a server's view of its tools (Config.AllowTools and
// DenyTools): a hidden tool is left out of every tools/list answer and a
// call to it is refused before it reaches the server.
type toolView struct{ allow, deny []string }

// empty reports that the view hides nothing.
func (v toolView) empty() bool { return len(v.allow) == 0 && len(v.deny) == 0 }

// visible reports whether the tool of that name is in the view.
func (v toolView) visible(name string) bool {
	match := func(g string) bool { return glob(g, name) }
	if slices.ContainsFunc(v.deny, match) {
		return false
	}
	return len(v.allow) == 0 || slices.ContainsFunc(v.allow, match)
}

// refusal is the error for a tools/call the view hides, or nil.
func (v toolView) refusal(m *message) *jsonrpc.Error {
	if v.empty() || m.Method != "tools/call" {
		return nil
	}
	var p struct {
		Name string `json:"name"`
	}
	if m.Params != nil {
		_ = json.Unmarshal(m.Params, &p) // a bad name is the server's to refuse
	}
	if v.visible(p.Name) {
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown tool: " + p.Name, Reason: jsonrpc.ReasonUnknownTool}
}

// filter is a tools/list result without the hidden tools; ok is false
// when it is unchanged (nothing hidden, or not a list it can read).
func (v toolView) filter(result json.RawMessage) (out json.RawMessage, ok bool) {
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
		return json.Unmarshal(t, &named) == nil && !v.visible(named.Name)
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

// filterAnswer is the server's answer m to a tools/list as the view lets
// a session see it: m itself, or a new message with the hidden tools left
// out.
func (v toolView) filterAnswer(method string, m *jsonrpc.Message) *jsonrpc.Message {
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
// of characters (none included) and '?' for any one character: the
// endpoints' matching (endpoint.Glob).
func glob(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
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
