package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFlowControl20000: a client that writes 20,000 requests without waiting
// while it reads the answers is slowed down (mcpmux stops reading it while it
// has max_inflight requests in flight), never dropped: it gets every answer.
func TestFlowControl20000(t *testing.T) {
	n := 20000
	if testing.Short() && raceEnabled {
		n = 5000
	}
	d := startDaemon(t, demo("demo", nil), "")
	c := open(t, d.socket("demo"))

	start := time.Now()
	written := make(chan error, 1)
	go func() { // waited for below; closing c at cleanup unblocks it
		c.conn.SetWriteDeadline(time.Now().Add(2 * time.Minute))
		w := bufio.NewWriterSize(c.conn, 64<<10)
		for i := range n {
			w.Write(toolCall(strconv.Itoa(i), "echo", map[string]string{"text": "m" + strconv.Itoa(i)}))
			w.WriteByte('\n')
		}
		written <- w.Flush() // bufio keeps the first write error
	}()

	seen := make([]bool, n)
	for got := range n {
		m, err := c.read()
		require.NoError(t, err, "after %d of %d answers", got, n)
		i, err := strconv.Atoi(string(m.ID))
		require.NoError(t, err, "answer under an id never sent: %s", m.Frame)
		require.False(t, seen[i], "answer %d came twice", i)
		seen[i] = true
		text, err := resultText(m)
		require.NoError(t, err)
		require.Equal(t, "m"+strconv.Itoa(i), text)
	}
	require.NoError(t, <-written)
	elapsed := time.Since(start)
	t.Logf("%d pipelined echo calls in %v: %.0f calls/s", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	assert.Equal(t, n+2, c.mustStats(t).Requests, "requests the server received: mcpmux's initialize, %d echo calls, this stats call", n)
}

// percentiles returns the 50th and 99th percentiles of d (sorted in place).
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	slices.Sort(d)
	return d[len(d)/2], d[(len(d)*99)/100]
}

// hugeRequests asks for count results of size bytes each, ids 0..count-1.
func hugeRequests(count, size int) [][]byte {
	frames := make([][]byte, count)
	for i := range frames {
		frames[i] = toolCall(strconv.Itoa(i), "huge", map[string]int{"bytes": size})
	}
	return frames
}

// slowReaderLoad is how much the slow session asks for: 40 results of 2.5 MB
// (100 MB). Under the race detector the daemon reads and checks those bytes
// an order of magnitude slower, and the other session's answers queue behind
// them on the server's one stdout, so there the load is 16 MB: still twice
// outbox_max.
func slowReaderLoad() (count, size int) {
	if raceEnabled {
		return 40, 400_000
	}
	return 40, 2_500_000
}

// TestSlowReaderIsolation: session S asks for 100 MB of results and does not
// read them. Once more than outbox_max is queued for it, mcpmux evicts it;
// meanwhile session F's calls keep being answered. The latencies F saw are
// logged, not judged.
func TestSlowReaderIsolation(t *testing.T) {
	count, size := slowReaderLoad()
	d := startDaemon(t, demo("demo", nil), `outbox_max = "8MiB"`)
	slow, fast := open(t, d.socket("demo")), open(t, d.socket("demo"))

	// Watch for the eviction while F works, to time it.
	start := time.Now()
	stopWatch := make(chan struct{})
	evictedAfter := make(chan time.Duration, 1)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for !strings.Contains(d.log(), "evict") {
			select {
			case <-tick.C:
			case <-stopWatch:
				evictedAfter <- -1
				return
			}
		}
		evictedAfter <- time.Since(start)
	}()
	defer close(stopWatch)

	require.NoError(t, slow.send(hugeRequests(count, size)...))
	lat := make([]time.Duration, 200)
	for i := range lat {
		t0 := time.Now()
		require.NoError(t, fast.echo(strconv.Itoa(i), fmt.Sprintf("fast %d", i)), "call %d of the fast session", i)
		lat[i] = time.Since(t0)
	}
	total := time.Since(start)
	p50, p99 := percentiles(lat)
	t.Logf("fast session, 200 echo calls while the slow one asked for %d MB: p50 %v, p99 %v, max %v, all done in %v",
		count*size/1_000_000, p50.Round(time.Microsecond), p99.Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond),
		total.Round(time.Millisecond))

	var after time.Duration
	select {
	case after = <-evictedAfter:
	case <-time.After(20 * time.Second):
	}
	require.Positive(t, after, "the daemon must log the eviction of the session that stopped reading")
	t.Logf("eviction logged %v after the slow session sent its requests", after.Round(time.Millisecond))

	// S reads at last: what was already in its socket, then the end.
	slow.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	n, err := io.Copy(io.Discard, slow.conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the evicted connection must end, not stall: %v", err)
	assert.Less(t, n, int64(count*size), "the evicted session cannot have received everything")
	t.Logf("the evicted session read %d bytes before its connection ended (%v)", n, err)

	// The daemon and the server are still fine.
	require.NoError(t, fast.echo(`"after"`, "after"))
}
