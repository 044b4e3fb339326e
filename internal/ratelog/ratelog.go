// Package ratelog keeps a flood of like records out of the daemon's log: a
// slog.Handler that lets through the first record of each kind (its key) in
// an interval and counts the others, then writes one record with the count
// when the interval ends. A peer that provokes the same warning a million
// times costs the log a line per interval, not a million lines.
//
// The handlers a Handler derives (WithAttrs, WithGroup) share its counts, so
// the records of every logger made from one Handler are limited together:
// the daemon makes one and hands it to every connection.
//
// # Goroutines
//
// Each key's interval ends by a timer, armed when its first record passes
// (state.admit) and again when an interval ends with records held back
// (state.take). Nobody waits for it: it takes the key's interval under the
// lock, writes the held-back count (outside the lock) if there is one, and
// otherwise forgets the key. A Handler has no Close: a key's last timer
// fires at most two intervals after its last record.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The defaults of Config's zero values.
const (
	DefaultInterval = 10 * time.Second
	DefaultMaxKeys  = 1024
)

// CountKey is the attribute of the record that ends an interval: how many
// records of its key were held back in it, this one included.
const CountKey = "suppressed"

// Config sets a Handler's limits.
type Config struct {
	// Interval: of the records of one key, one passes per interval; the
	// others are counted. 0 means DefaultInterval.
	Interval time.Duration
	// Key names the kind of a record; records with the same key are
	// limited together. nil means the level and the message.
	Key func(r slog.Record) string
	// MaxKeys bounds the keys counted at once; the records of further
	// keys share one key until some interval ends. 0 means DefaultMaxKeys.
	MaxKeys int
	// MinLevel: records below it pass unlimited. The zero value is Info,
	// so that debug records are all there when they are asked for.
	MinLevel slog.Level
}

// Handler is a rate-limited slog.Handler in front of another.
type Handler struct {
	next slog.Handler
	st   *state
}

// New returns a Handler that passes what its Config lets through to next.
func New(next slog.Handler, cfg Config) *Handler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.Key == nil {
		cfg.Key = func(r slog.Record) string { return r.Level.String() + " " + r.Message }
	}
	return &Handler{next: next, st: &state{cfg: cfg, keys: make(map[string]*window)}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// WithAttrs implements slog.Handler; the new handler shares h's counts.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), st: h.st}
}

// WithGroup implements slog.Handler; the new handler shares h's counts.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), st: h.st}
}

// Handle implements slog.Handler: the first record of its key in an
// interval goes to the next handler, the others are counted.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= h.st.cfg.MinLevel && !h.st.admit(ctx, r, h.next) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// state is what the handlers derived from one New share.
type state struct {
	cfg Config

	mu   sync.Mutex
	keys map[string]*window // the keys in an interval; a key leaves when one passes without records
}

// window is one key's interval: the records held back in it, and the
// first of them, which the interval's end writes with their count.
type window struct {
	held  int
	first slog.Record
	ctx   context.Context
	next  slog.Handler
}

// overflowKey is the key of the records whose own key found the table full.
const overflowKey = "\x00overflow"

// admit reports whether r passes now; otherwise it is counted, and kept
// when it is the first its key held back in this interval.
func (s *state) admit(ctx context.Context, r slog.Record, next slog.Handler) bool {
	key := s.cfg.Key(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.keys[key]
	if !ok && len(s.keys) >= s.cfg.MaxKeys {
		key = overflowKey
		w, ok = s.keys[key]
	}
	if !ok {
		s.keys[key] = &window{}
		time.AfterFunc(s.cfg.Interval, func() { s.end(key) })
		return true
	}
	if w.held++; w.held == 1 {
		w.first, w.ctx, w.next = r.Clone(), context.WithoutCancel(ctx), next
	}
	return false
}

// end closes key's interval: with records held back in it, the first of
// them is written with their count and a new interval begins; without,
// the key is forgotten and its next record passes at once.
func (s *state) end(key string) {
	w := s.take(key)
	if w == nil {
		return
	}
	r := w.first
	r.AddAttrs(slog.Int(CountKey, w.held))
	_ = w.next.Handle(w.ctx, r) // a log that cannot be written has no one to tell
}

// take settles key's interval under the lock and returns what is to be
// written, if anything.
func (s *state) take(key string) *window {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.keys[key]
	if w == nil || w.held == 0 {
		delete(s.keys, key)
		return nil
	}
	s.keys[key] = &window{}
	time.AfterFunc(s.cfg.Interval, func() { s.end(key) })
	return w
}
