package mux

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"
)

// eventLog keeps the recent log lines about one server (its stderr lines and
// mcpmux's own events: starts, exits, restarts, stalls, refusals) for
// `mcpmux logs`, and hands new ones to followers. Both are bounded: the ring
// forgets the oldest line, and a follower that falls behind loses lines and
// is told how many.
type eventLog struct {
	mu        sync.Mutex
	lines     []string
	next      int
	full      bool
	followers map[chan string]*int // channel -> lines it missed
}

const (
	eventLogLines   = 500
	followerBacklog = 256
)

func newEventLog() *eventLog {
	return &eventLog{lines: make([]string, eventLogLines), followers: map[chan string]*int{}}
}

func (l *eventLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines[l.next] = line
	l.next = (l.next + 1) % len(l.lines)
	l.full = l.full || l.next == 0
	for ch, missed := range l.followers {
		select {
		case ch <- line:
		default:
			*missed++
		}
	}
}

// recent returns the kept lines, oldest first.
func (l *eventLog) recent() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.full {
		return append([]string(nil), l.lines[:l.next]...)
	}
	return append(append([]string(nil), l.lines[l.next:]...), l.lines[:l.next]...)
}

// follow calls fn with every new line until ctx is done; it reports lines it
// had to drop because fn was too slow.
func (l *eventLog) follow(ctx context.Context, fn func(string) error) error {
	ch := make(chan string, followerBacklog)
	missed := new(int)
	l.mu.Lock()
	l.followers[ch] = missed
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.followers, ch)
		l.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line := <-ch:
			l.mu.Lock()
			n := *missed
			*missed = 0
			l.mu.Unlock()
			if n > 0 {
				if err := fn("... " + itoa(int64(n)) + " lines dropped (the reader was too slow)"); err != nil {
					return err
				}
			}
			if err := fn(line); err != nil {
				return err
			}
		}
	}
}

// teeHandler passes records on and also writes them, as text, to an eventLog.
type teeHandler struct {
	inner slog.Handler
	text  slog.Handler // formats into buf
	mu    *sync.Mutex
	buf   *bytes.Buffer
	log   *eventLog
}

func newTeeHandler(inner slog.Handler, log *eventLog) *teeHandler {
	buf := new(bytes.Buffer)
	return &teeHandler{
		inner: inner,
		text: slog.NewTextHandler(buf, &slog.HandlerOptions{
			Level: slog.LevelDebug - 4,
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) == 0 && a.Key == slog.TimeKey {
					return slog.String(slog.TimeKey, a.Value.Time().Format(time.DateTime+".000"))
				}
				return a
			},
		}),
		mu:  new(sync.Mutex),
		buf: buf,
		log: log,
	}
}

func (t *teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || t.inner.Enabled(ctx, l)
}

func (t *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		t.mu.Lock()
		t.buf.Reset()
		t.text.Handle(ctx, r)
		line := string(bytes.TrimRight(t.buf.Bytes(), "\n"))
		t.mu.Unlock()
		t.log.add(line)
	}
	if t.inner.Enabled(ctx, r.Level) {
		return t.inner.Handle(ctx, r)
	}
	return nil
}

func (t *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *t
	c.inner = t.inner.WithAttrs(as)
	c.text = t.text.WithAttrs(as)
	return &c
}

func (t *teeHandler) WithGroup(name string) slog.Handler {
	c := *t
	c.inner = t.inner.WithGroup(name)
	c.text = t.text.WithGroup(name)
	return &c
}

// Logs returns the recent log lines about this server, oldest first.
func (h *Hub) Logs() []string { return h.events.recent() }

// FollowLogs calls fn with each new log line about this server until ctx is
// done or fn fails.
func (h *Hub) FollowLogs(ctx context.Context, fn func(string) error) error {
	return h.events.follow(ctx, fn)
}
