package integration

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// manyLarge has n sessions, opened first, send one echo of size bytes each
// at the same moment, and returns what went wrong with each (nil when it
// got its own answer: its id, and its text byte for byte).
func manyLarge(t *testing.T, socket string, n, size int) []error {
	t.Helper()
	clients := make([]*client, n)
	for i := range clients {
		clients[i] = open(t, socket)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range clients {
		wg.Go(func() {
			id := strconv.Quote(fmt.Sprintf("big-%d", i))
			text := strings.Repeat(string(rune('a'+i%26)), size-20) + fmt.Sprintf("%020d", i)
			<-start
			if err := c.send(toolCall(id, "echo", map[string]string{"text": text})); err != nil {
				errs[i] = err
				return
			}
			m, err := awaitWithin(c, id, bigTimeout)
			if err != nil {
				errs[i] = err
				return
			}
			got, err := resultText(m)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%w: %.300s", err, m.Frame)
			case got != text:
				errs[i] = fmt.Errorf("session %d got another text (%d bytes, ending %q)", i, len(got), got[max(0, len(got)-20):])
			}
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// bigTimeout bounds the wait for one answer among many large ones: 256 MB
// through a race-built daemon and server on a shared machine.
const bigTimeout = 3 * time.Minute

// awaitWithin is client.await with a deadline of its own for the whole
// wait, rather than ioTimeout for each read.
func awaitWithin(c *client, id string, d time.Duration) (*jsonrpc.Message, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	for {
		frame, err := c.r.Read()
		if err != nil {
			return nil, fmt.Errorf("waiting for the answer to %s: %w", id, err)
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil {
			return nil, fmt.Errorf("the daemon sent an invalid message %.200q: %w", frame, err)
		}
		if (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && string(m.ID) == id {
			return m, nil
		}
	}
}

// TestManyLargeRequestsWaitForTheWriteQueue: 256 sessions send a 1 MB
// request each at the same moment, 256 MB for a server whose write queue
// takes twice write_queue_bytes. None is refused with "write queue full":
// the sessions wait for room, and every one gets its own answer. The same
// with a write queue of 4 MiB, which 256 MB overshoots 32 times over.
func TestManyLargeRequestsWaitForTheWriteQueue(t *testing.T) {
	for _, tc := range []struct{ name, queue string }{{"default queue", ""}, {"4MiB queue", `write_queue_bytes = "4MiB"`}} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.queue == "" {
				t.Skip("-short: the 4 MiB queue alone (a minute of 256 MB through the race detector otherwise)")
			}
			extra := []string{`max_message_bytes = "2MiB"`}
			if tc.queue != "" {
				extra = append(extra, tc.queue)
			}
			d := startDaemon(t, demo("demo", nil, extra...), "")
			began := time.Now()
			errs := manyLarge(t, d.socket("demo"), 256, 1_000_000)
			failed := 0
			for i, err := range errs {
				if err != nil {
					failed++
					if failed <= 5 {
						t.Errorf("session %d: %v", i, err)
					}
				}
			}
			assert.Zero(t, failed, "sessions without their answer")
			assert.NotContains(t, d.log(), "write queue full")
			t.Logf("256 sessions of 1 MB requests answered in %v", time.Since(began).Round(time.Millisecond))
			require.Equal(t, 0, failed)
		})
	}
}
