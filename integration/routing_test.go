package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestSessionsShareOneServer: twenty sessions open at once, and the server
// behind them is one process that was initialized once.
func TestSessionsShareOneServer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	const n = 20
	clients := make([]*client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := dialSocket(d.socket("demo"))
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = c
			_, errs[i] = c.initialize("2025-06-18")
		})
	}
	wg.Wait()
	for i := range n {
		if clients[i] != nil {
			t.Cleanup(func() { clients[i].close() })
		}
		require.NoError(t, errs[i], "session %d", i)
	}

	// Every session, still connected, asks the server who it is.
	stats := make([]demoStats, n)
	for i := range n {
		wg.Go(func() { stats[i], errs[i] = clients[i].stats() })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "stats from session %d", i)
	}
	for i := range n {
		assert.Equal(t, stats[0].PID, stats[i].PID, "session %d reached another process", i)
		assert.Equal(t, 1, stats[i].Initialize, "initialize requests the server received, as seen by session %d", i)
		assert.Equal(t, 1, stats[i].Initialized, "notifications/initialized the server received, as seen by session %d", i)
	}
}

// TestPipelinedIDsAcrossSessions: 32 sessions each pipeline 100 requests
// under the same ids (numbers and strings alike); every answer reaches the
// session that asked, under its own id and with its own payload.
func TestPipelinedIDsAcrossSessions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")

	t.Run("same ids from 32 sessions", func(t *testing.T) {
		const sessions, perSession = 32, 100
		ids := make([]string, perSession)
		for k := range ids {
			if k%2 == 0 {
				ids[k] = strconv.Itoa(k / 2) // 0..49
			} else {
				ids[k] = strconv.Quote(strconv.Itoa(k / 2)) // "0".."49": the same digits as strings
			}
		}
		errs := make([]error, sessions)
		var wg sync.WaitGroup
		for s := range sessions {
			wg.Go(func() { errs[s] = pipeline(d.socket("demo"), s, ids) })
		}
		wg.Wait()
		for s, err := range errs {
			assert.NoError(t, err, "session %d", s)
		}
	})

	t.Run("odd ids come back byte for byte", func(t *testing.T) {
		c := open(t, d.socket("demo"))
		odd := []string{
			`1`, `"1"`, `-5`, `0`,
			`9007199254740993`,               // 2^53+1: a float64 would round it
			`123456789012345678901234567890`, // beyond int64 and uint64
			`-9223372036854775809`,           // below int64
			`""`,
			`"a\"b\\c\n\t\/"`,          // escapes, kept as written
			`"caf\u00e9 \ud83d\ude00"`, // escaped non-ASCII and a surrogate pair
			`"日本語 ✓"`,                  // raw non-ASCII
			`"<&>"`,                    // what an HTML-escaping encoder would rewrite
			`"  spaces  "`,
		}
		// All in flight at once, so that 1 and "1" are told apart.
		var frames [][]byte
		want := map[string]string{}
		for i, id := range odd {
			text := fmt.Sprintf("odd id %d", i)
			frames = append(frames, toolCall(id, "echo", map[string]string{"text": text}))
			want[id] = text
		}
		require.NoError(t, c.send(frames...))
		got := map[string]string{}
		for range odd {
			m, err := c.read()
			require.NoError(t, err)
			text, err := resultText(m)
			require.NoError(t, err, "answer %s", m.Frame)
			got[string(m.ID)] = text
		}
		assert.Equal(t, want, got, "answers by their exact id bytes")
	})

	t.Run("ids of the wrong type are refused and the session goes on", func(t *testing.T) {
		c := open(t, d.socket("demo"))
		for i, id := range []string{`null`, `{"id":1}`, `[1]`, `true`, `false`, `1.5`, `1e3`} {
			require.NoError(t, c.send(toolCall(id, "echo", map[string]string{"text": "refused"})))
			m, err := c.read()
			require.NoError(t, err)
			e, err := errorOf(m)
			require.NoError(t, err, "id %s", id)
			assert.Equal(t, answer{jsonrpc.CodeInvalidRequest, jsonrpc.ReasonInvalidRequest, "null"},
				answer{e.Code, e.Data.Reason, string(m.ID)}, "id %s", id)
			require.NoError(t, c.echo(strconv.Itoa(i), "goes on"), "after id %s", id)
		}
	})
}

// pipeline is one session of TestPipelinedIDsAcrossSessions: it writes all
// its requests at once, reads all the answers, and reports the first thing
// that is wrong. It runs on its own goroutine, so it returns errors.
func pipeline(path string, session int, ids []string) error {
	c, err := dialSocket(path)
	if err != nil {
		return err
	}
	defer c.close()
	if _, err := c.initialize("2025-06-18"); err != nil {
		return err
	}
	want := make(map[string]string, len(ids))
	frames := make([][]byte, len(ids))
	for k, id := range ids {
		want[id] = fmt.Sprintf("session %d, id %s", session, id)
		frames[k] = toolCall(id, "echo", map[string]string{"text": want[id]})
	}
	written := make(chan error, 1)
	go func() { written <- c.send(frames...) }() // waited for below
	var firstErr error
	for range ids {
		m, err := c.read()
		if err != nil {
			firstErr = fmt.Errorf("%d answers missing: %w", len(want), err)
			break
		}
		text, err := resultText(m)
		payload, ok := want[string(m.ID)]
		switch {
		case err != nil:
			firstErr = err
		case !ok:
			firstErr = fmt.Errorf("an answer under id %s, which is not due: %s", m.ID, m.Frame)
		case text != payload:
			firstErr = fmt.Errorf("id %s answered with %q, want %q", m.ID, text, payload)
		}
		if firstErr != nil {
			break
		}
		delete(want, string(m.ID))
	}
	c.close() // unblocks the writer if the reading stopped early
	return errors.Join(firstErr, <-written)
}

// slowCall is a tools/call of the slow tool, with a progress token when
// token (raw JSON) is not empty.
func slowCall(id string, ms, steps int, token string) []byte {
	params := map[string]any{"name": "slow", "arguments": map[string]int{"ms": ms, "steps": steps}}
	if token != "" {
		params["_meta"] = map[string]json.RawMessage{"progressToken": json.RawMessage(token)}
	}
	return request(id, "tools/call", params)
}

// cancel is a notifications/cancelled for requestID (raw JSON).
func cancel(requestID string) []byte {
	return notification("notifications/cancelled", map[string]any{"requestId": json.RawMessage(requestID), "reason": "test"})
}

// TestProgressOwner: two sessions use the same progress token on the same
// id; each gets its own three notifications, under its own token, and
// nothing of the other's.
func TestProgressOwner(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	a, b := open(t, d.socket("demo")), open(t, d.socket("demo"))
	for _, c := range []*client{a, b} {
		require.NoError(t, c.send(slowCall("1", 300, 3, `"p"`)))
	}
	for name, c := range map[string]*client{"A": a, "B": b} {
		m, before, err := c.await("1")
		require.NoError(t, err, "session %s", name)
		text, err := resultText(m)
		require.NoError(t, err)
		assert.Equal(t, "waited 300 ms", text)
		var progress []string
		for _, n := range before {
			tok, ok := progressToken(n)
			require.True(t, ok, "session %s got something else than progress: %s", name, n.Frame)
			var p struct {
				Progress int `json:"progress"`
				Total    int `json:"total"`
			}
			require.NoError(t, json.Unmarshal(n.Params, &p))
			progress = append(progress, fmt.Sprintf("%s %d/%d", tok, p.Progress, p.Total))
		}
		assert.Equal(t, []string{`"p" 1/3`, `"p" 2/3`, `"p" 3/3`}, progress, "session %s", name)
	}
	// Upstream, the two requests carried two different tokens of mcpmux's.
	st := a.mustStats(t)
	require.Len(t, st.ProgressTokens, 2)
	assert.NotEqual(t, string(st.ProgressTokens[0]), string(st.ProgressTokens[1]))
	assert.NotContains(t, []string{string(st.ProgressTokens[0]), string(st.ProgressTokens[1])}, `"p"`)
}

// inFlight waits until the server has seen n requests carrying progress
// tokens and returns their tokens, which are the ids mcpmux gave them.
func inFlight(tb testing.TB, stats *client, n int) []json.RawMessage {
	tb.Helper()
	var st demoStats
	testutil.Eventually(tb, 5*time.Second, fmt.Sprintf("%d requests reach the server", n), func() (bool, error) {
		var err error
		st, err = stats.stats()
		return err == nil && len(st.ProgressTokens) >= n, err
	})
	return st.ProgressTokens
}

// TestCancelAcrossSessions: sessions A and B both have a request 7 in
// flight; A's cancellation of 7 reaches the server once, under the id mcpmux
// gave A's request, and B's request completes. Cancellations of ids A does
// not have in flight, whatever they look like, never reach the server.
func TestCancelAcrossSessions(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	stats := open(t, d.socket("demo"))
	a, b := open(t, d.socket("demo")), open(t, d.socket("demo"))

	// The tokens tell the upstream ids: mcpmux uses the request's upstream
	// id as its progress token.
	require.NoError(t, a.send(slowCall("7", 5000, 0, `"a"`)))
	upA := inFlight(t, stats, 1)[0]
	require.NoError(t, b.send(slowCall("7", 1500, 0, `"b"`)))
	upB := inFlight(t, stats, 2)[1]
	require.NotEqual(t, string(upA), string(upB))

	require.NoError(t, a.send(cancel("7")))
	testutil.Eventually(t, 2*time.Second, "the cancellation reaches the server", func() (bool, error) {
		st, err := stats.stats()
		return err == nil && len(st.Cancelled) > 0, err
	})
	st := stats.mustStats(t)
	assert.Equal(t, []json.RawMessage{upA}, st.Cancelled, "cancellations the server received")
	assert.Equal(t, []json.RawMessage{upA}, st.Aborted, "requests a cancellation stopped")

	// A now names ids it does not own: small integers that look like
	// upstream ids, B's upstream id, its own finished 7, strings.
	var frames [][]byte
	for i := 1; i <= 10; i++ {
		frames = append(frames, cancel(strconv.Itoa(i)))
	}
	frames = append(frames, cancel(string(upB)), cancel(`"7"`), cancel(`"b"`))
	require.NoError(t, a.send(frames...))
	// A session's messages are handled in order, and mcpmux writes to the
	// server in order: once this echo is answered, any cancellation A sent
	// before it was either dropped or already written upstream.
	require.NoError(t, a.send(toolCall(`"sync"`, "echo", map[string]string{"text": "sync"})))
	_, before, err := a.await(`"sync"`)
	require.NoError(t, err)
	assert.Empty(t, before, "A must get nothing but its echo")

	m, before, err := b.await("7")
	require.NoError(t, err)
	text, err := resultText(m)
	require.NoError(t, err, "B's request 7 must complete")
	assert.Equal(t, "waited 1500 ms", text)
	assert.Empty(t, before)

	st = stats.mustStats(t)
	assert.Equal(t, []json.RawMessage{upA}, st.Cancelled, "cancellations the server received, in the end")

	// The cancelled 7 is never answered to A, not even after B's 7 was.
	require.NoError(t, a.send(toolCall(`"last"`, "echo", map[string]string{"text": "last"})))
	_, before, err = a.await(`"last"`)
	require.NoError(t, err)
	assert.Empty(t, before, "A must get nothing but its echo")

	// A cancelled id is free again at once: A may reuse 7.
	require.NoError(t, a.echo("7", "reused"), "A reuses the id it cancelled")
}

// TestDisconnectCancelsWithin1s: a session that hangs up with a request in
// flight has it cancelled upstream at once.
func TestDisconnectCancelsWithin1s(t *testing.T) {
	d := startDaemon(t, demo("demo", nil), "")
	stats := open(t, d.socket("demo"))
	c := open(t, d.socket("demo"))
	require.NoError(t, c.send(slowCall("1", 10000, 0, `"t"`)))
	up := inFlight(t, stats, 1)[0]

	require.NoError(t, c.close())
	delay := testutil.Eventually(t, time.Second, "the server sees the cancellation", func() (bool, error) {
		st, err := stats.stats()
		return err == nil && len(st.Aborted) > 0, err
	})
	t.Logf("cancellation reached the server %v after the client hung up", delay.Round(time.Millisecond))
	st := stats.mustStats(t)
	assert.Equal(t, []json.RawMessage{up}, st.Cancelled)
	assert.Equal(t, []json.RawMessage{up}, st.Aborted)
}
