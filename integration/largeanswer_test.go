package integration

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLargeAnswersByteExact: answers of 10 MB and more reach the client
// byte for byte as the server wrote them, under the client's own id, one
// after another on two sessions (the daemon reads them into buffers it
// reuses: none of one answer may show in the next). The echoed text has
// the escapes and multi-byte runes that the daemon's check of a large
// frame, a buffer-full at a time, must take across its cuts.
func TestLargeAnswersByteExact(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	a, b := open(t, d.socket("demo")), open(t, d.socket("demo"))
	text := strings.Repeat("héllo \"wörld\"\n\t😀 \\ ", 5<<20/26)
	for i, size := range []int{10 << 20, 3<<20 + 1, 10<<20 + 7} {
		for j, c := range []*client{a, b} {
			id := fmt.Sprintf(`"big-%d-%c"`, i, 'a'+j)
			require.NoError(t, c.send(toolCall(id, "huge", map[string]any{"bytes": size})))
			got, err := c.readFrame()
			require.NoError(t, err)
			want := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}]}}`
			assert.True(t, string(got) == want, "answer %s: %d bytes, want %d, first difference at %d", id, len(got), len(want), firstDifference(got, []byte(want)))
		}
	}
	require.NoError(t, a.send(toolCall(`"echo"`, "echo", map[string]string{"text": text})))
	got, err := a.readFrame()
	require.NoError(t, err)
	quoted := strconv.Quote(text) // the same bytes JSON gives this text: no control but \n and \t, no <>&
	want := `{"jsonrpc":"2.0","id":"echo","result":{"content":[{"type":"text","text":` + quoted + `}],"structuredContent":{"text":` + quoted + `}}}`
	assert.True(t, string(got) == want, "echo of %d bytes of text: %d bytes, want %d, first difference at %d", len(text), len(got), len(want), firstDifference(got, []byte(want)))
	require.NoError(t, b.echo(`"after"`, "still served"))
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestInvalidLargeAnswerRefused: a 20 MB answer, under a raised
// max_message_bytes, that turns out not to be JSON near its end (a NaN, a
// Latin-1 byte) never reaches the client: its request fails with -32603
// invalid_answer under the client's id, as a short invalid answer does,
// and the session and the server go on.
func TestInvalidLargeAnswerRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil, `max_message_bytes = "32MiB"`), "")
	c := open(t, d.socket("demo"))
	for _, kind := range []string{"nan", "latin1"} {
		m, err := c.tool(`"bad-`+kind+`"`, "invalid", map[string]any{"kind": kind, "bytes": 20 << 20})
		require.NoError(t, err, kind)
		assert.Less(t, len(m.Frame), 1<<10, "%s: a short error, not the answer", kind)
		e, err := errorOf(m)
		require.NoError(t, err, "%s: an error answer: %.300s", kind, m.Frame)
		assert.Equal(t, []any{`"bad-` + kind + `"`, -32603, "invalid_answer", "demo"}, []any{string(m.ID), e.Code, e.Data.Reason, e.Data.Server}, kind)
	}
	require.NoError(t, c.echo(`"after"`, "still served"))
	assert.Contains(t, d.log(), "invalid answer from the server", "the line is logged")
}

// TestEightLargeAnswersAtOnce: eight sessions each ask for a 10 MB answer
// at once and read it whole; the daemon's peak resident set (VmHWM) stays
// within the 120 MiB (without the race detector, whose shadow
// memory triples what the heap touches).
func TestEightLargeAnswersAtOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the daemon's memory from /proc")
	}
	d := startDaemon(t, demo("demo", nil), "")
	clients := make([]*client, 8)
	for i := range clients {
		clients[i] = open(t, d.socket("demo"))
		require.NoError(t, clients[i].echo(`"warm"`, "up"))
	}
	before := peakResident(t, d.cmd.Process.Pid)
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			size := 10<<20 + i
			if errs[i] = c.send(toolCall(strconv.Itoa(i+1), "huge", map[string]any{"bytes": size})); errs[i] != nil {
				return
			}
			got, err := c.readFrame()
			want := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"result":{"content":[{"type":"text","text":"`
			switch {
			case err != nil:
				errs[i] = err
			case !bytes.HasPrefix(got, []byte(want)) || len(got) != len(want)+size+len(`"}]}}`):
				errs[i] = fmt.Errorf("session %d: %d bytes beginning %.80q", i, len(got), got)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	peak := peakResident(t, d.cmd.Process.Pid)
	t.Logf("8 sessions x 10 MB at once: daemon peak RSS %.1f MiB (%.1f MiB before; race detector: %v)",
		float64(peak)/(1<<20), float64(before)/(1<<20), raceEnabled)
	if !raceEnabled {
		assert.LessOrEqual(t, peak, int64(120<<20), "peak resident set")
	}
}

// peakResident is a process's peak resident set so far (VmHWM).
func peakResident(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
