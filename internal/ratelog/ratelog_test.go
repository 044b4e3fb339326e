package ratelog_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/ratelog"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// line is one record as the next handler received it.
type line struct {
	msg   string
	attrs map[string]string
	held  int // the CountKey attribute; 0 when absent
}

// capture is a slog.Handler that keeps what it is given.
type capture struct {
	mu    *sync.Mutex
	lines *[]line
	with  []slog.Attr
}

func newCapture() *capture { return &capture{mu: new(sync.Mutex), lines: new([]line)} }

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) WithGroup(string) slog.Handler            { return c }
func (c *capture) WithAttrs(as []slog.Attr) slog.Handler {
	return &capture{mu: c.mu, lines: c.lines, with: append(append([]slog.Attr(nil), c.with...), as...)}
}

func (c *capture) Handle(_ context.Context, r slog.Record) error {
	l := line{msg: r.Message, attrs: map[string]string{}}
	add := func(a slog.Attr) bool {
		if a.Key == ratelog.CountKey {
			l.held = int(a.Value.Int64())
		} else {
			l.attrs[a.Key] = a.Value.String()
		}
		return true
	}
	for _, a := range c.with {
		add(a)
	}
	r.Attrs(add)
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.lines = append(*c.lines, l)
	return nil
}

func (c *capture) all() []line {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]line(nil), *c.lines...)
}

// accounted is how many records the lines stand for: each line itself,
// or the count it carries.
func accounted(lines []line, msg string) (records, written int) {
	for _, l := range lines {
		if l.msg != msg {
			continue
		}
		written++
		if l.held > 0 {
			records += l.held
		} else {
			records++
		}
	}
	return records, written
}

// TestFloodIsOneLineThenACount: of a burst of like records the first is
// written at once and the rest are counted, the count written when the
// interval ends; every record is accounted for, and a quiet interval later
// the key is forgotten, so the next record is written at once again.
func TestFloodIsOneLineThenACount(t *testing.T) {
	const interval = 200 * time.Millisecond
	c := newCapture()
	h := ratelog.New(c, ratelog.Config{Interval: interval})
	log := slog.New(h)
	start := time.Now()
	for i := range 1000 {
		log.Warn("frame for missing stream", "stream", i)
	}
	burst := time.Since(start)
	first := c.all()
	require.NotEmpty(t, first, "the first record is written at once")
	assert.Equal(t, line{msg: "frame for missing stream", attrs: map[string]string{"stream": "0"}}, first[0])

	testutil.Until(t, 5*time.Second, "every record of the burst accounted for", func() bool {
		n, _ := accounted(c.all(), "frame for missing stream")
		return n == 1000
	})
	n, written := accounted(c.all(), "frame for missing stream")
	assert.Equal(t, 1000, n, "records accounted for")
	// One line, then one count per interval the burst spanned.
	assert.LessOrEqual(t, written, 2+int(burst/interval)+1, "lines written for a burst of %v", burst)

	// A quiet interval ends the key: the next record passes at once.
	testutil.Until(t, 5*time.Second, "the key forgotten after a quiet interval", func() bool { return h.Keys() == 0 })
	before := len(c.all())
	log.Warn("frame for missing stream", "stream", 1000)
	after := c.all()
	require.Len(t, after, before+1, "a record after a quiet interval is written at once")
	assert.Equal(t, line{msg: "frame for missing stream", attrs: map[string]string{"stream": "1000"}}, after[before])
}

// TestKeysAreLimitedApart: records of another key pass while one key is
// held back, and the handlers derived with WithAttrs share the counts
// (one line for a flood from many connections), the count going out with
// the attributes of the first record held back.
func TestKeysAreLimitedApart(t *testing.T) {
	c := newCapture()
	h := ratelog.New(c, ratelog.Config{Interval: time.Hour})
	a := slog.New(h).With("conn", "a")
	b := slog.New(h).With("conn", "b")
	a.Warn("ping flood")
	b.Warn("ping flood")
	b.Warn("ping flood")
	a.Warn("stream refused")
	b.Warn("stream refused")
	assert.Equal(t, []line{
		{msg: "ping flood", attrs: map[string]string{"conn": "a"}},
		{msg: "stream refused", attrs: map[string]string{"conn": "a"}},
	}, c.all(), "one line per key, whichever logger wrote it")
	assert.Equal(t, 2, h.Keys())
}

// TestCountCarriesTheFirstHeldRecord: the line written at the interval's
// end is the first record held back, through the handler it was given
// to, with the count of them all.
func TestCountCarriesTheFirstHeldRecord(t *testing.T) {
	c := newCapture()
	h := ratelog.New(c, ratelog.Config{Interval: 50 * time.Millisecond, Key: func(r slog.Record) string { return r.Message }})
	slog.New(h).Warn("refused", "peer", "p0")
	slog.New(h).With("conn", "x").Warn("refused", "peer", "p1")
	slog.New(h).Warn("refused", "peer", "p2")
	testutil.Until(t, 5*time.Second, "the count written", func() bool { return len(c.all()) == 2 })
	assert.Equal(t, []line{
		{msg: "refused", attrs: map[string]string{"peer": "p0"}},
		{msg: "refused", attrs: map[string]string{"conn": "x", "peer": "p1"}, held: 2},
	}, c.all())
	testutil.Until(t, 5*time.Second, "the key forgotten", func() bool { return h.Keys() == 0 })
}

// TestMaxKeysBoundsTheTable: past MaxKeys, records of new keys share one
// key, so that a flood of distinct messages is limited too.
func TestMaxKeysBoundsTheTable(t *testing.T) {
	c := newCapture()
	h := ratelog.New(c, ratelog.Config{Interval: time.Hour, MaxKeys: 2})
	log := slog.New(h)
	for _, m := range []string{"one", "two", "three", "four", "five", "one"} {
		log.Warn(m)
	}
	assert.Equal(t, []line{
		{msg: "one", attrs: map[string]string{}},
		{msg: "two", attrs: map[string]string{}},
		{msg: "three", attrs: map[string]string{}},
	}, c.all(), "two keys of their own, then one shared by the rest")
	assert.Equal(t, 3, h.Keys(), "two keys and the shared one")
}

// TestBelowMinLevelPasses: debug records are not limited by default.
func TestBelowMinLevelPasses(t *testing.T) {
	c := newCapture()
	log := slog.New(ratelog.New(c, ratelog.Config{Interval: time.Hour}))
	for range 3 {
		log.Debug("yamux connection")
	}
	_, written := accounted(c.all(), "yamux connection")
	assert.Equal(t, 3, written, "debug records all written")
}
