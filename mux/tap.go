package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
)

// Taps is the set of taps watching the messages of hubs: the daemon makes
// one and gives it to every hub in Config.Taps. With no tap attached a
// message costs one atomic load (Taps.active) and allocates nothing.
type Taps struct {
	mu  sync.Mutex             // serialises attach and detach; publish never takes it
	set atomic.Pointer[[]*Tap] // copied on write; nil when no tap is attached
}

// TapFilter says what a tap sees: the servers named (all when empty), one
// session (all when 0), and whole messages with Full.
type TapFilter struct {
	Servers []string
	Session uint64
	Full    bool
}

// The bounds of each tap's queue, in lines and in the bytes of the
// messages it holds. A tap that falls behind loses lines and counts them.
const (
	TapQueue      = 256
	TapQueueBytes = 4 << 20
)

// tapFrameCap bounds the bytes of a message a tap keeps (and --full shows).
const tapFrameCap = 64 << 10

// Tap is one watcher: a bounded queue the hubs never wait on.
type Tap struct {
	taps *Taps
	f    TapFilter
	ch   chan TapEvent // receives only in Next; sends only in offer, under mu

	mu     sync.Mutex
	lost   int64 // lines dropped since the last line queued or the last count shown
	queued int   // bytes of the frames in ch
}

// TapEvent is one message seen by a tap, or (Lost > 0) the lines it lost
// in this place. Its JSON is the line of GET /tap (DESIGN.md).
type TapEvent struct {
	Time       time.Time       `json:"time"`
	Server     string          `json:"server,omitempty"`
	Session    uint64          `json:"session,omitempty"`
	Client     string          `json:"client,omitempty"`
	Dir        string          `json:"dir,omitempty"`  // "up" to the server, "down" to the client
	Kind       string          `json:"kind,omitempty"` // request, notification, answer, error
	Method     string          `json:"method,omitempty"`
	ID         json.RawMessage `json:"id,omitempty"`          // the client's
	UpstreamID json.RawMessage `json:"upstream_id,omitempty"` // the server's
	Bytes      int             `json:"bytes,omitempty"`
	MS         *float64        `json:"ms,omitempty"`    // answers: since the request
	Shape      string          `json:"shape,omitempty"` // redacted: keys and types, no values
	Message    json.RawMessage `json:"message,omitempty"`
	Lost       int64           `json:"lost,omitempty"`

	frame []byte // a copy, capped at tapFrameCap; render makes Shape or Message of it
}

// NewTaps returns an empty set.
func NewTaps() *Taps { return &Taps{} }

// Attach adds a tap; Tap.Close removes it.
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

// Close detaches the tap. The last one out leaves the set nil, so that
// messages cost nothing again.
func (t *Tap) Close() {
	ts := t.taps
	ts.mu.Lock()
	defer ts.mu.Unlock()
	cur := ts.set.Load()
	if cur == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*cur), func(x *Tap) bool { return x == t })
	if len(next) == 0 {
		ts.set.Store(nil)
		return
	}
	ts.set.Store(&next)
}

// active is the taps attached, nil when none: the hot path's one atomic load.
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
// queue counts the line lost. The frame is copied once, when the first
// tap has room for it, so a stalled tap costs no copy.
func (ts *Taps) publish(taps []*Tap, ev TapEvent, frame []byte) {
	ev.Bytes = len(frame)
	frame = frame[:min(len(frame), tapFrameCap)]
	var kept []byte
	for _, t := range taps {
		if t.wants(ev) {
			t.offer(ev, frame, &kept)
		}
	}
}

func (t *Tap) wants(ev TapEvent) bool {
	if t.f.Session != 0 && ev.Session != t.f.Session {
		return false
	}
	return len(t.f.Servers) == 0 || slices.Contains(t.f.Servers, ev.Server)
}

// offer queues ev with its frame (copied into *kept if no tap has yet),
// after the count of the lines lost before it, or counts it lost when the
// queue is full. The sends cannot block: only offer sends, under mu, and
// only when there is room.
func (t *Tap) offer(ev TapEvent, frame []byte, kept *[]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := 1
	if t.lost > 0 {
		lines = 2
	}
	if cap(t.ch)-len(t.ch) < lines || t.queued+len(frame) > TapQueueBytes {
		t.lost++
		return
	}
	if *kept == nil {
		*kept = slices.Clone(frame)
	}
	ev.frame = *kept
	if t.lost > 0 {
		select {
		case t.ch <- TapEvent{Time: ev.Time, Lost: t.lost}:
			t.lost = 0
		default: // cannot happen: room was checked under mu
		}
	}
	select {
	case t.ch <- ev:
		t.queued += len(ev.frame)
	default:
		t.lost++
	}
}

// Next is the tap's next line, waiting for one until ctx is done: the
// oldest queued, or, once the queue is empty, the count of the lines lost
// since.
func (t *Tap) Next(ctx context.Context) (TapEvent, error) {
	select {
	case ev := <-t.ch:
		return t.taken(ev), nil
	default:
	}
	if n := t.takeLost(); n > 0 {
		return TapEvent{Time: time.Now(), Lost: n}, nil
	}
	select {
	case ev := <-t.ch:
		return t.taken(ev), nil
	case <-ctx.Done():
		return TapEvent{}, ctx.Err()
	}
}

func (t *Tap) takeLost() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.lost
	t.lost = 0
	return n
}

// taken counts ev's bytes out of the queue and renders it.
func (t *Tap) taken(ev TapEvent) TapEvent {
	t.dequeued(len(ev.frame))
	return t.render(ev)
}

func (t *Tap) dequeued(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queued -= n
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
// values, but for the name of the tool of tools/call and of the prompt of
// prompts/get.
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
		p, isObj := v.(map[string]any)
		name, isStr := p["name"].(string)
		if isObj && isStr && k == "params" && (m["method"] == "tools/call" || m["method"] == "prompts/get") {
			return shapeObject(p, map[string]string{"name": name})
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

// String is the event as `mcpmux tap` prints it: time, server, session
// (client), direction, what it is with both ids, size, time taken, and
// the shape or the message.
func (ev TapEvent) String() string {
	ts := ev.Time.Local().Format("15:04:05.000")
	if ev.Lost > 0 {
		return fmt.Sprintf("%s ... %d lines lost (the tap fell behind)", ts, ev.Lost)
	}
	who := "*" // every session: a notification the server broadcast
	if ev.Session != 0 {
		who = fmt.Sprintf("#%d", ev.Session)
	}
	if ev.Client != "" {
		who += " (" + ev.Client + ")"
	}
	arrow := map[string]string{"up": "->", "down": "<-"}[ev.Dir]
	what := ev.Method
	if ev.Kind == "answer" || ev.Kind == "error" {
		what = ev.Kind + " to " + ev.Method
	}
	if len(ev.ID) > 0 || len(ev.UpstreamID) > 0 {
		what += fmt.Sprintf(" id %s (up %s)", orDash(ev.ID), orDash(ev.UpstreamID))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s %s %dB", ts, ev.Server, who, arrow, what, ev.Bytes)
	if ev.MS != nil {
		fmt.Fprintf(&b, " %.1fms", *ev.MS)
	}
	switch {
	case len(ev.Message) > 0:
		b.WriteString(" " + string(ev.Message))
	case ev.Shape != "":
		b.WriteString(" " + ev.Shape)
	}
	return b.String()
}

func orDash(id json.RawMessage) string {
	if len(id) == 0 {
		return "-"
	}
	return string(id)
}

// tell tells taps of one message of session c's (nil: of no one session,
// such as a broadcast) on the named server.
func (ts *Taps) tell(taps []*Tap, server string, c *client, ev TapEvent, frame []byte) {
	ev.Time = time.Now()
	ev.Server = server
	if c != nil {
		ev.Session = c.sess.ID()
		ev.Client = c.clientName()
	}
	ts.publish(taps, ev, frame)
}

// tellAnswer tells taps of an answer (an error when failed) to the
// request sent with route r (under the server's id up: nil when mcpmux
// answers for the server), with the time since it was sent; dir is where
// the answer goes.
func (ts *Taps) tellAnswer(taps []*Tap, server string, c *client, dir string, r idmap.Route, up json.RawMessage, failed bool, frame []byte) {
	ev := TapEvent{Dir: dir, Kind: "answer", Method: r.Method, ID: slices.Clone(r.ID), UpstreamID: up}
	if failed {
		ev.Kind = "error"
	}
	if !r.Started.IsZero() {
		ms := float64(time.Since(r.Started).Microseconds()) / 1000
		ev.MS = &ms
	}
	ts.tell(taps, server, c, ev, frame)
}

// clientName is the name the session's client gave in initialize.
func (c *client) clientName() string {
	_, info := c.identity()
	var ci struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(info, &ci) != nil {
		return ""
	}
	return ci.Name
}

// upID is an upstream id as the tap shows it.
func upID(up int64) json.RawMessage { return strconv.AppendInt(nil, up, 10) }
