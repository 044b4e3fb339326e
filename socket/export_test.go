package socket

import (
	"context"
	"log/slog"
	"sync"
)

// Record is a log record reduced to what tests compare.
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]any
}

// LogRecorder is a slog.Handler that keeps every record, for tests.
type LogRecorder struct {
	mu      sync.Mutex
	records []Record
}

func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := make(map[string]any)
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Resolve().Any()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, Record{Level: rec.Level, Msg: rec.Message, Attrs: attrs})
	return nil
}

func (r *LogRecorder) WithAttrs([]slog.Attr) slog.Handler {
	panic("LogRecorder: WithAttrs not supported")
}
func (r *LogRecorder) WithGroup(string) slog.Handler { panic("LogRecorder: WithGroup not supported") }

// Records returns a copy of what was logged so far.
func (r *LogRecorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// ConnCounts reports the web listener's checked and unchecked connections
// open.
func (w *Web) ConnCounts() (checked, unchecked int) { return w.conns.counts() }

// StreamsOpen reports the long-lived streams counted in.
func (w *Web) StreamsOpen() int { return w.streams.Open() }
