package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// Taps is the set of taps watching the messages of hubs: the daemon makes
// one and gives it to every hub in Config.Taps. With no tap attached a
// message costs one atomic load (Taps.publish's first line).
type Taps struct {
	mu  sync.Mutex             // serialises attach and detach; publish never takes it
	set atomic.Pointer[[]*Tap] // copied on write; nil or empty: no tap
}

// TapFilter says what a tap sees: the servers named (all when empty), one
// session (all when 0), and whole messages with Full.
type TapFilter struct {
	Servers []string
	Session uint64
	Full    bool
}

// TapQueue bounds each tap's queue of lines; a tap that falls behind loses
// lines and counts them.
const TapQueue = 256

// tapFrameCap bounds the bytes of a message a tap keeps.
const tapFrameCap = 64 << 10

// Tap is one watcher: a bounded queue the hubs never wait on.
type Tap struct {
	taps *Taps
	f    TapFilter
	ch   chan TapEvent
	lost atomic.Int64
}

// TapEvent is one message seen by a tap, or (Lost > 0) the lines it lost.
type TapEvent struct {
	Time       time.Time       `json:"time"`
	Server     string          `json:"server,omitempty"`
	Session    uint64          `json:"session,omitempty"`
	Client     string          `json:"client,omitempty"`
	Dir        string          `json:"dir,omitempty"`  // "up" to the server, "down" to the client
	Kind       string          `json:"kind,omitempty"` // request, notification, answer, error
	Method     string          `json:"method,omitempty"`
	ID         json.RawMessage `json:"id,omitempty"` // the client's
	UpstreamID int64           `json:"upstream_id,omitempty"`
	Bytes      int             `json:"bytes,omitempty"`
	MS         *float64        `json:"ms,omitempty"`    // answers: since the request
	Shape      string          `json:"shape,omitempty"` // redacted: keys and types, no values
	Message    json.RawMessage `json:"message,omitempty"`
	Lost       int64           `json:"lost,omitempty"`

	frame []byte // a copy, capped at tapFrameCap; Render makes Shape or Message of it
}

// NewTaps returns an empty set.
func NewTaps() *Taps { return &Taps{} }

// Attach adds a tap; Detach (or Tap.Close) removes it.
func (ts *Taps) Attach(f TapFilter) *Tap {
	t := &Tap{taps: ts, f: f, ch: make(chan TapEvent, TapQueue)}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var next []*Tap
	if cur := ts.set.Load(); cur != nil {
		next = slices.Clone(*cur)
	}
	next = append(next, t)
	ts.set.Store(&next)
	return t
}

// Close detaches the tap.
func (t *Tap) Close() {
	ts := t.taps
	ts.mu.Lock()
	defer ts.mu.Unlock()
	cur := ts.set.Load()
	if cur == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*cur), func(x *Tap) bool { return x == t })
	ts.set.Store(&next)
}

// active says whether any tap is attached: the hot path's one atomic load.
func (ts *Taps) active() []*Tap {
	if ts == nil {
		return nil
	}
	if cur := ts.set.Load(); cur != nil {
		return *cur
	}
	return nil
}

// publish offers ev to every tap that wants it, never waiting: a full
// queue counts the line lost.
func (ts *Taps) publish(taps []*Tap, ev TapEvent, frame []byte) {
	ev.Bytes = len(frame)
	ev.frame = []byte(string(frame[:min(len(frame), tapFrameCap)]))
	for _, t := range taps {
		if !t.wants(ev) {
			continue
		}
		select {
		case t.ch <- ev:
		default:
			t.lost.Add(1)
		}
	}
}

func (t *Tap) wants(ev TapEvent) bool {
	if t.f.Session != 0 && ev.Session != t.f.Session {
		return false
	}
	return len(t.f.Servers) == 0 || slices.Contains(t.f.Servers, ev.Server)
}

// Next is the tap's next line: first the count of lines lost, if any, then
// the oldest queued; it waits for one until ctx is done.
func (t *Tap) Next(ctx context.Context) (TapEvent, error) {
	if n := t.lost.Swap(0); n > 0 {
		return TapEvent{Time: time.Now(), Lost: n}, nil
	}
	select {
	case ev := <-t.ch:
		return t.render(ev), nil
	case <-ctx.Done():
		return TapEvent{}, ctx.Err()
	}
}

// render fills Shape (redacted) or Message (full) from the copy of the
// frame, on the tap's reader, off the hubs' paths.
func (t *Tap) render(ev TapEvent) TapEvent {
	frame := ev.frame
	ev.frame = nil
	if t.f.Full {
		if len(frame) < ev.Bytes || !json.Valid(frame) {
			ev.Message, _ = json.Marshal(string(frame) + "…")
		} else {
			ev.Message = frame
		}
		return ev
	}
	ev.Shape = Redact(frame, ev.Bytes)
	return ev
}

// Redact is a message shown by its shape: keys and types with sizes, no
// values but a tool's or prompt's name in params.
func Redact(frame []byte, size int) string {
	if len(frame) < size {
		return fmt.Sprintf("(%d bytes, too large to show)", size)
	}
	var m map[string]any
	if json.Unmarshal(frame, &m) != nil {
		return fmt.Sprintf("(%d bytes, not a JSON object)", size)
	}
	for _, k := range []string{"params", "result", "error"} {
		v, ok := m[k]
		if !ok {
			continue
		}
		if p, isObj := v.(map[string]any); isObj && k == "params" {
			if name, isStr := p["name"].(string); isStr {
				return shapeObject(p, map[string]string{"name": name})
			}
		}
		return shape(v)
	}
	return ""
}

func shape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return shapeObject(x, nil)
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return fmt.Sprintf("[%d×%s]", len(x), shape(x[0]))
	case string:
		return fmt.Sprintf("string(%d)", len(x))
	case float64:
		return "number"
	case bool:
		return "bool"
	default:
		return "null"
	}
}

// shapeObject shows an object's keys in order with their values' shapes,
// except the keys of shown, whose values are quoted.
func shapeObject(o map[string]any, shown map[string]string) string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		if s, ok := shown[k]; ok {
			fmt.Fprintf(&b, "%s:%q", k, s)
			continue
		}
		fmt.Fprintf(&b, "%s:%s", k, shape(o[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// tap tells taps of one message of this session's.
func (c *client) tap(taps []*Tap, ev TapEvent, frame []byte) {
	ev.Time = time.Now()
	ev.ID = slices.Clone(ev.ID)
	ev.Server = c.h.cfg.Name
	ev.Session = c.sess.ID()
	_, info := c.identity()
	var ci struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(info, &ci) == nil {
		ev.Client = ci.Name
	}
	c.h.cfg.Taps.publish(taps, ev, frame)
}

// tapAnswer tells taps of the server's answer to one of this session's
// requests, with the time since it was sent.
func (c *client) tapAnswer(taps []*Tap, r idmap.Route, up int64, m *jsonrpc.Message) {
	ev := TapEvent{Dir: "down", Kind: "answer", Method: r.Method, ID: r.ID, UpstreamID: up}
	if m.Kind == jsonrpc.KindError {
		ev.Kind = "error"
	}
	if !r.Started.IsZero() {
		ms := float64(time.Since(r.Started).Microseconds()) / 1000
		ev.MS = &ms
	}
	c.tap(taps, ev, m.Frame)
}
