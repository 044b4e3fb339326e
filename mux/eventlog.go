package mux

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
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
	missed := l.addFollower(ch)
	defer l.removeFollower(ch)
	for {
		select {
		case <-ctx.Done():
			return nil
		case line := <-ch:
			if n := l.takeMissed(missed); n > 0 {
				if err := fn("... " + strconv.Itoa(n) + " lines dropped (the reader was too slow)"); err != nil {
					return err
				}
			}
			if err := fn(line); err != nil {
				return err
			}
		}
	}
}

func (l *eventLog) addFollower(ch chan string) *int {
	l.mu.Lock()
	defer l.mu.Unlock()
	missed := new(int)
	l.followers[ch] = missed
	return missed
}

func (l *eventLog) removeFollower(ch chan string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.followers, ch)
}

// takeMissed returns and clears the count of lines a follower missed.
func (l *eventLog) takeMissed(missed *int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := *missed
	*missed = 0
	return n
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
		t.log.add(t.format(ctx, r))
	}
	if t.inner.Enabled(ctx, r.Level) {
		return t.inner.Handle(ctx, r)
	}
	return nil
}

// format is the record as one line of text.
func (t *teeHandler) format(ctx context.Context, r slog.Record) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Reset()
	t.text.Handle(ctx, r)
	return string(bytes.TrimRight(t.buf.Bytes(), "\n"))
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
