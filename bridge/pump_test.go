package bridge

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestPumpStreamsLargeAnswers: a 10 MB answer passes through whole
// without the bridge holding it: less than 1 MB is allocated per answer,
// whether the id comes first or after the result, and the request it
// answers is settled (stdin's end is then not kept waiting).
func TestPumpStreamsLargeAnswers(t *testing.T) {
	body := bigResult(10 << 20)
	for _, idLast := range []bool{false, true} {
		r := startPumpRig(t, body, idLast, false)
		head := len(`{"jsonrpc":"2.0","id":1,"result":}`) + 1
		require.Equal(t, len(body)+head, r.call(t, 1), "the whole answer, once")
		const calls = 3
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range calls {
			require.Equal(t, len(body)+head, r.call(t, i+2))
		}
		runtime.ReadMemStats(&after)
		perAnswer := (after.TotalAlloc - before.TotalAlloc) / calls
		assert.Less(t, perAnswer, uint64(1<<20), "bytes allocated per 10 MB answer (id last: %v)", idLast)
		t.Logf("id last: %v: %d bytes allocated per 10 MB answer", idLast, perAnswer)
		r.stdin.Close()
		assert.NoError(t, <-r.done, "stdin ended with nothing due")
		r.done <- nil
	}
}

// TestPumpLinkLostMidAnswer: a daemon that goes in the middle of a large
// answer leaves the client a line cut short (ended, so that what follows
// is a line of its own), then the request's daemon_gone error with its
// id, while an answer that came whole before is not answered again; the
// new session hears the client's initialize again, and goes on.
func TestPumpLinkLostMidAnswer(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, bridgeWithin)
	b.send(legacyInit)
	c1.answer(c1.read(), initResult)
	b.read()
	b.send(`{"jsonrpc":"2.0","id":"whole","method":"tools/call","params":{"name":"x"}}`)
	b.send(`{"jsonrpc":"2.0","id":"cut","method":"tools/call","params":{"name":"x"}}`)
	c1.read()
	c1.read()
	text := strings.Repeat("x", 300<<10)
	whole := `{"jsonrpc":"2.0","id":"whole","result":{"content":[{"type":"text","text":"` + text + `"}]}}`
	got := make(chan []string, 1)
	go func() { // waited for below: the client reads as the daemon writes
		var lines []string
		for range 2 {
			line, _ := b.stdout.ReadString('\n')
			lines = append(lines, strings.TrimSuffix(line, "\n"))
		}
		got <- lines
	}()
	_, err := c1.conn.Write([]byte(whole + "\n" + `{"jsonrpc":"2.0","id":"cut","result":{"content":[{"type":"text","text":"` + text))
	require.NoError(t, err)
	c1.conn.Close()
	var lines []string
	select {
	case lines = <-got:
	case <-time.After(bridgeWithin):
		t.Fatal("the answers did not come")
	}
	assert.Equal(t, whole, lines[0], "the whole answer")
	cut := lines[1]
	assert.True(t, strings.HasPrefix(cut, `{"jsonrpc":"2.0","id":"cut","result":`), "the answer cut short, as far as it came")
	assert.Greater(t, len(cut), 64<<10, "streamed, more than a buffer-full")
	assert.Equal(t, daemonGone(`"cut"`), b.read(), "then the request's own error")

	c2 := f.accept()
	assert.JSONEq(t, strings.Replace(legacyInit, `"id":1`, `"id":"mcpmux-connect-replay-1"`, 1), c2.read(), "the client's initialize, replayed")
	c2.answer(`{"jsonrpc":"2.0","id":"mcpmux-connect-replay-1","method":"initialize"}`, initResult)
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, b.read())
	assert.Equal(t, `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`, b.read())
	b.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x"}}`)
	next := c2.read()
	c2.answer(next, `{"content":[]}`)
	m, err := jsonrpc.Parse([]byte(b.read()))
	require.NoError(t, err, "the next answer, on the new session")
	assert.Equal(t, "5", string(m.ID), "%s", next)
}

// TestPumpReadsWhatItMust: the lines the bridge must read are read whole
// even when they are longer than its buffer: the answer to the client's
// initialize (its version is noted, and a replay warns when a new session
// speaks another) and a batch of answers (each settles its request, so
// that stdin's end is not kept waiting).
func TestPumpReadsWhatItMust(t *testing.T) {
	f := newFakeDaemon(t)
	b, c1 := startTestBridge(t, f, bridgeWithin)
	pad := strings.Repeat("p", 100<<10)
	b.send(legacyInit)
	bigInit := strings.Replace(initResult, `"serverInfo":{"name":"fake"`, `"instructions":"`+pad+`","serverInfo":{"name":"fake"`, 1)
	c1.answer(c1.read(), bigInit)
	m, err := jsonrpc.Parse([]byte(b.read()))
	require.NoError(t, err, "the long answer to initialize, whole")
	assert.JSONEq(t, bigInit, string(m.Result))
	c1.conn.Close()
	c2 := f.accept()
	older := strings.Replace(initResult, "2025-06-18", "2025-03-26", 1)
	c2.answer(c2.read(), older)
	b.read() // tools/list_changed
	b.read() // resources/list_changed
	assert.Contains(t, b.stderr.String(), "the new session speaks protocol 2025-03-26, the client was told 2025-06-18",
		"the version of the long answer was noted")

	b.send(`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}]`)
	c2.read()
	batch := `[{"jsonrpc":"2.0","id":2,"result":{"text":"` + pad + `"}},{"jsonrpc":"2.0","id":3,"result":{"text":"` + pad + `"}}]`
	c2.write(batch)
	assert.Equal(t, batch, b.read(), "the long batch of answers, whole")
	require.NoError(t, b.stdin.Close())
	assert.NoError(t, b.result(), "both requests were settled: nothing due at stdin's end")
}
