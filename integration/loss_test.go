package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestHalfClosedClientGetsAllItsAnswers: a raw client that writes its
// requests and shuts down its writing side, as `printf ... | nc -U` does,
// gets every answer: initialize's, a 1 ms echo's, and a slow call's that
// comes long after the EOF. Then the daemon closes the connection.
func TestHalfClosedClientGetsAllItsAnswers(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	conn, err := net.DialTimeout("unix", d.socket("demo"), ioTimeout)
	require.NoError(t, err)
	defer conn.Close()
	var in bytes.Buffer
	for _, f := range [][]byte{
		request(`1`, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]string{"name": "nc", "version": "1"}}),
		notification("notifications/initialized", nil),
		toolCall(`2`, "echo", map[string]string{"text": "quick"}),
		slowCall(`3`, 700, 0, ""),
		toolCall(`"four"`, "echo", map[string]string{"text": "last"}),
	} {
		in.Write(append(f, '\n'))
	}
	_, err = conn.Write(in.Bytes())
	require.NoError(t, err)
	sent := time.Now()
	require.NoError(t, conn.(*net.UnixConn).CloseWrite())

	conn.SetReadDeadline(time.Now().Add(ioTimeout))
	out, err := io.ReadAll(conn)
	require.NoError(t, err, "the daemon closes the connection once everything is answered")
	took := time.Since(sent)
	answers := map[string]*jsonrpc.Message{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		m, err := jsonrpc.Parse(line)
		require.NoError(t, err, "line %q", line)
		answers[string(m.ID)] = m
	}
	require.Len(t, answers, 4, "answers: %s", out)
	for id, want := range map[string]string{`2`: "quick", `3`: "waited 700 ms", `"four"`: "last"} {
		m := answers[id]
		require.NotNil(t, m, "the answer to %s", id)
		text, err := resultText(m)
		require.NoError(t, err, "the answer to %s", id)
		assert.Equal(t, want, text, "the answer to %s", id)
	}
	assert.Equal(t, jsonrpc.KindResult, answers[`1`].Kind, "initialize's answer")
	assert.GreaterOrEqual(t, took, 700*time.Millisecond, "the slow call was waited for")
	t.Logf("all 4 answers within %v of the half-close", took.Round(time.Millisecond))
}

// TestClosedClientCancels: a client that closes its connection altogether
// with a request in flight has it cancelled at the server at once, as
// before: no drain for a client that cannot read.
func TestClosedClientCancels(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	stats := open(t, d.socket("demo"))
	c := open(t, d.socket("demo"))
	require.NoError(t, c.send(slowCall(`9`, 10000, 0, `"tok"`)))
	up := inFlight(t, stats, 1)[0]
	require.NoError(t, c.close())
	testutil.Eventually(t, 5*time.Second, "the server sees the request cancelled", func() (bool, error) {
		st, err := stats.stats()
		return err == nil && len(st.Aborted) > 0, err
	})
	assert.Equal(t, []json.RawMessage{up}, stats.mustStats(t).Aborted, "the request the close cancelled")
}

// TestInvalidAnswerFailsItsRequest: a server answer that is not valid JSON
// (Python's NaN, a Latin-1 byte in a string) but whose id is readable
// fails its request with -32603 invalid_answer at once, under the
// client's id (there is no request_timeout: nothing else would answer it);
// the line is logged, and the session and the server go on.
func TestInvalidAnswerFailsItsRequest(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	c := open(t, d.socket("demo"))
	for _, kind := range []string{"nan", "latin1"} {
		start := time.Now()
		m, err := c.tool(`"bad-`+kind+`"`, "invalid", map[string]string{"kind": kind})
		took := time.Since(start)
		require.NoError(t, err, kind)
		e, err := errorOf(m)
		require.NoError(t, err, "%s: an error answer: %s", kind, m.Frame)
		assert.Equal(t, []any{-32603, "invalid_answer", "demo"}, []any{e.Code, e.Data.Reason, e.Data.Server}, kind)
		t.Logf("%s: invalid_answer after %v", kind, took.Round(time.Millisecond))
	}
	require.NoError(t, c.echo(`"after"`, "still served"))
	assert.Contains(t, d.log(), "invalid answer from the server", "the line is logged")
	assert.Contains(t, d.log(), `NaN}}`, "with what it said")
	assert.NotContains(t, d.log(), "junk on server stdout", "an answer is no junk")
}
