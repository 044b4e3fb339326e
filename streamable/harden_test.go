package streamable_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/streamable"
)

// TestStreamableBrokenBody: a body that cannot be read (a broken chunked
// encoding) is a 400 with a JSON-RPC body, not a silent 200.
func TestStreamableBrokenBody(t *testing.T) {
	hs := startHTTP(t, 0)
	addr := strings.TrimPrefix(strings.TrimSuffix(hs.base, "/servers/demo"), "http://")
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /servers/demo HTTP/1.1\r\nHost: "+addr+"\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\n\r\nzz-not-a-size\r\n{}\r\n0\r\n\r\n")
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	_, reason, server := rpcError(t, resp)
	assert.Equal(t, "parse_error", reason)
	assert.Equal(t, "demo", server)
}

// echoOf is an echo request of about n bytes.
func echoOf(id, n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"pad":%q}}`, id, strings.Repeat("p", n))
}

// streamOf is the stream number an event id names ("3-17": 3).
func streamOf(id string) string {
	no, _, _ := strings.Cut(id, "-")
	return no
}

// TestStreamableReplayBounded: past the session's bound the oldest
// delivered events are dropped (their stream resumes empty), the newest
// are kept and resume, and an answer the client never got is kept for it.
func TestStreamableReplayBounded(t *testing.T) {
	hs := startHTTPConfig(t, streamable.Config{ReplaySessionBytes: 1000})
	sid := hs.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	var streams []string
	for i := range 3 {
		evs := readEvents(t, hs.do(t, "POST", echoOf(10+i, 400), hdr), -1)
		require.Len(t, evs, 1)
		streams = append(streams, streamOf(evs[0].id))
	}
	resume := func(st string) []sse {
		t.Helper()
		resp := hs.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+st+"-0")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return readEvents(t, resp, -1)
	}
	assert.Empty(t, resume(streams[0]), "the oldest delivered answer is dropped past the bound")
	newest := resume(streams[2])
	require.Len(t, newest, 1, "the newest delivered answer is kept within the bound")
	assert.Contains(t, newest[0].data, `"id":12`)

	// An answer that comes while the client is away is kept for it.
	post := hs.do(t, "POST", `{"jsonrpc":"2.0","id":"g","method":"gate","params":{"_meta":{"progressToken":1}}}`, hdr)
	first := readEvents(t, post, 1)
	post.Body.Close()
	hs.hub.gate <- struct{}{}
	var again *http.Response
	testutil.Until(t, 10*time.Second, "the gate's stream resumes", func() bool {
		again = hs.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+first[0].id)
		return again.StatusCode == http.StatusOK
	})
	evs := readEvents(t, again, -1)
	require.Len(t, evs, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"g","result":"opened"}`, evs[1].data)
}

// TestStreamableEvictsIdlest: at MaxSessions a new session ends the one
// idle for longest; with every session busy it is refused 503.
func TestStreamableEvictsIdlest(t *testing.T) {
	hs := startHTTPConfig(t, streamable.Config{MaxSessions: 2})
	a := hs.initialize(t)
	b := hs.initialize(t)
	readEvents(t, hs.do(t, "POST", echoOf(1, 10), "Mcp-Session-Id: "+a), -1) // a is now the less idle
	c := hs.initialize(t)
	<-hs.hub.ended
	for sid, want := range map[string]int{a: http.StatusOK, b: http.StatusNotFound, c: http.StatusOK} {
		resp := hs.do(t, "POST", echoOf(2, 10), "Mcp-Session-Id: "+sid)
		assert.Equal(t, want, resp.StatusCode, "session %s", sid)
		readEventsNoFail(resp)
	}

	// Both busy: no one to evict.
	gates := map[string]*http.Response{}
	for _, sid := range []string{a, c} {
		gates[sid] = hs.do(t, "POST", `{"jsonrpc":"2.0","id":"g","method":"gate","params":{"_meta":{"progressToken":1}}}`, "Mcp-Session-Id: "+sid)
		readEvents(t, gates[sid], 1)
	}
	resp := hs.do(t, "POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_, reason, _ := rpcError(t, resp)
	assert.Equal(t, "too_many_sessions", reason)
	for range gates {
		hs.hub.gate <- struct{}{}
	}
}

// TestStreamableInflightPOSTs: POSTs of one session being read count
// against MaxInflight: with 1, a second POST waits until the first one's
// body is in.
func TestStreamableInflightPOSTs(t *testing.T) {
	hs := startHTTPConfig(t, streamable.Config{MaxInflight: 1})
	sid := hs.initialize(t)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), "POST", hs.base, pr)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	slow := make(chan *http.Response, 1)
	go func() { // ends when the body is complete, or with the test
		resp, err := hs.hc.Do(req)
		if err == nil {
			slow <- resp
		}
		close(slow)
	}()
	_, err = io.WriteString(pw, `{"jsonrpc":"2.0","id":1,`)
	require.NoError(t, err)
	var probes sync.WaitGroup // each ends once the slow POST's body is in
	defer probes.Wait()
	probe := func() int {
		req, _ := http.NewRequest("POST", hs.base, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/x"}`))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := hs.hc.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testutil.Until(t, 10*time.Second, "the slow POST holds the only room", func() bool {
		done := make(chan int, 1)
		probes.Go(func() { done <- probe() })
		select {
		case <-done:
			return false // the slow POST had not taken its room yet
		case <-time.After(300 * time.Millisecond):
			return true
		}
	})
	_, err = io.WriteString(pw, `"method":"echo","params":{}}`)
	require.NoError(t, err)
	pw.Close()
	resp := <-slow
	require.NotNil(t, resp)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp, -1)
	require.Len(t, evs, 1)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, evs[0].data)
}

// TestStreamableRestore: a session kept in the Store is made again by the
// next Handler when its client comes back: the client's initialize is
// replayed (its answer kept from the client), then its log level and
// subscriptions, then the client's own request is answered.
func TestStreamableRestore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "http-sessions")
	store := &streamable.FileStore{Dir: dir, Max: 8, Idle: time.Hour}
	one := startHTTPConfig(t, streamable.Config{Store: store})
	sid := one.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	assert.Equal(t, http.StatusAccepted, one.do(t, "POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr).StatusCode)
	readEvents(t, one.do(t, "POST", `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`, hdr), -1)
	readEvents(t, one.do(t, "POST", `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///a"}}`, hdr), -1)
	one.h.Close() // the daemon stops: the record stays

	fi, err := os.Stat(filepath.Join(dir, sid+".json"))
	require.NoError(t, err, "the session is kept")
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	two := startHTTPConfig(t, streamable.Config{Store: store})
	resp := two.do(t, "POST", echoOf(4, 3), hdr)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readEvents(t, resp, -1)
	require.Len(t, evs, 1, "only the client's own answer")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":4,"result":{"pad":"ppp"}}`, evs[0].data)
	assert.Equal(t, []string{
		`initialize "mcpmux-http-restore"`,
		`logging/setLevel "mcpmux-http-restore-1"`,
		`resources/subscribe "mcpmux-http-restore-2"`,
		`echo 4`,
	}, two.hub.requests())

	// DELETE forgets it for good.
	assert.Equal(t, http.StatusNoContent, two.do(t, "DELETE", "", hdr).StatusCode)
	<-two.hub.ended
	two.h.Close()
	three := startHTTPConfig(t, streamable.Config{Store: store})
	resp = three.do(t, "POST", echoOf(5, 3), hdr)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	_, reason, _ := rpcError(t, resp)
	assert.Equal(t, "no_session", reason)
}

// TestStreamableRestoreExpired: a kept session idle past its time, or an
// id that is no session's, is 404 with a JSON-RPC body.
func TestStreamableRestoreExpired(t *testing.T) {
	dir := t.TempDir()
	store := &streamable.FileStore{Dir: dir, Max: 8, Idle: time.Hour}
	one := startHTTPConfig(t, streamable.Config{Store: store})
	sid := one.initialize(t)
	one.h.Close()
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, sid+".json"), old, old))

	two := startHTTPConfig(t, streamable.Config{Store: store})
	for _, id := range []string{sid, "../../etc/passwd", "AAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		resp := two.do(t, "POST", echoOf(1, 3), "Mcp-Session-Id: "+id)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, id)
		_, reason, _ := rpcError(t, resp)
		assert.Equal(t, "no_session", reason)
	}
	assert.NoFileExists(t, filepath.Join(dir, sid+".json"), "an expired record is removed")
	assert.Empty(t, two.hub.requests(), "nothing reached the server")
}

// TestFileStoreBounded: beyond Max records the oldest go.
func TestFileStoreBounded(t *testing.T) {
	dir := t.TempDir()
	store := &streamable.FileStore{Dir: dir, Max: 3, Idle: time.Hour}
	var ids []string
	for i := range 5 {
		id := strings.Repeat(string(rune('A'+i)), 26)
		require.NoError(t, store.Save(&streamable.Record{ID: id, Server: "demo", Initialize: []byte(`{}`)}))
		at := time.Now().Add(time.Duration(i-10) * time.Minute)
		require.NoError(t, os.Chtimes(filepath.Join(dir, id+".json"), at, at))
		ids = append(ids, id)
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 3)
	for i, id := range ids {
		_, err := store.Load(id)
		assert.Equal(t, i >= 2, err == nil, "record %d", i)
	}
}

// TestFileStoreBoundedInSteps: a full folder is pruned Max/8 records past
// Max, back to the newest Max.
func TestFileStoreBoundedInSteps(t *testing.T) {
	dir := t.TempDir()
	store := &streamable.FileStore{Dir: dir, Max: 16, Idle: time.Hour}
	var ids []string
	most := 0
	for i := range 40 {
		id := strings.Repeat("A", 24) + string(rune('A'+i/26)) + string(rune('A'+i%26))
		require.NoError(t, store.Save(&streamable.Record{ID: id, Server: "demo", Initialize: []byte(`{}`)}))
		at := time.Now().Add(time.Duration(i-100) * time.Second)
		require.NoError(t, os.Chtimes(filepath.Join(dir, id+".json"), at, at))
		ids = append(ids, id)
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		most = max(most, len(ents))
		if i == 18 {
			assert.Len(t, ents, 16, "the 19th record is 2 (16/8) past Max")
		}
	}
	assert.Equal(t, 18, most, "never more than Max + Max/8")
	for _, id := range ids[len(ids)-16:] {
		_, err := store.Load(id)
		assert.NoError(t, err, "the newest 16 are kept")
	}
}

// TestStreamableRestoreOnce: requests that come at once on a kept session
// make it again once, and are all answered.
func TestStreamableRestoreOnce(t *testing.T) {
	store := &streamable.FileStore{Dir: t.TempDir(), Max: 8, Idle: time.Hour}
	one := startHTTPConfig(t, streamable.Config{Store: store})
	sid := one.initialize(t)
	one.h.Close()

	two := startHTTPConfig(t, streamable.Config{Store: store})
	var wg sync.WaitGroup
	got := make([][]sse, 4)
	for i := range got {
		wg.Go(func() { // all at once, before the session is made again
			req, _ := http.NewRequest("POST", two.base, strings.NewReader(echoOf(i+1, 3)))
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			if resp, err := two.hc.Do(req); err == nil {
				got[i] = readEventsNoFail(resp)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	for i, evs := range got {
		require.Len(t, evs, 1, "request %d", i+1)
		assert.JSONEq(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"pad":"ppp"}}`, i+1), evs[0].data)
	}
	inits := 0
	for _, r := range two.hub.requests() {
		if strings.HasPrefix(r, "initialize ") {
			inits++
		}
	}
	assert.Equal(t, 1, inits, "one initialize replayed")
}

// TestStreamableRestoreOldEventID: a client that resumes its GET stream
// with an event id its earlier daemon gave gets what the session sends
// now: the new numbers start above the old ones.
func TestStreamableRestoreOldEventID(t *testing.T) {
	store := &streamable.FileStore{Dir: t.TempDir(), Max: 8, Idle: time.Hour}
	one := startHTTPConfig(t, streamable.Config{Store: store})
	sid := one.initialize(t)
	hdr := "Mcp-Session-Id: " + sid
	get := one.do(t, "GET", "", hdr, "Accept: text/event-stream")
	for range 3 {
		readEvents(t, one.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr), -1)
	}
	seen := readEvents(t, get, 3)
	one.h.Close()

	// The list change comes before the client is back on its GET stream:
	// it is kept for it, and the old event id must not hide it.
	two := startHTTPConfig(t, streamable.Config{Store: store})
	readEvents(t, two.do(t, "POST", `{"jsonrpc":"2.0","id":"n","method":"notify"}`, hdr), -1)
	resumed := two.do(t, "GET", "", hdr, "Accept: text/event-stream", "Last-Event-ID: "+seen[2].id)
	require.Equal(t, http.StatusOK, resumed.StatusCode)
	evs := readEvents(t, resumed, 1)
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, evs[0].data)
	assert.NotEqual(t, seen[2].id, evs[0].id)
}

// BenchmarkFileStoreSave: a new session's record with many records kept
// already (each new one used to read the whole folder).
func BenchmarkFileStoreSave(b *testing.B) {
	for _, c := range []struct {
		kept int
		full bool // the folder holds Max records already
	}{{10, false}, {5000, false}, {5000, true}} {
		kept := c.kept
		b.Run(fmt.Sprintf("kept=%d,full=%v", kept, c.full), func(b *testing.B) {
			dir := b.TempDir()
			store := &streamable.FileStore{Dir: dir, Max: kept + b.N + 1, Idle: time.Hour}
			if c.full {
				store.Max = kept
			}
			id := func(n int) string { // 26 letters of rand.Text's alphabet
				b := []byte(strings.Repeat("A", 26))
				for i := 25; n > 0; i, n = i-1, n/26 {
					b[i] = byte('A' + n%26)
				}
				return string(b)
			}
			for n := range kept {
				require.NoError(b, store.Save(&streamable.Record{ID: id(n), Server: "demo", Initialize: []byte(`{}`)}))
			}
			b.ResetTimer()
			for n := range b.N {
				store.Save(&streamable.Record{ID: id(kept + n), Server: "demo", Initialize: []byte(`{}`)})
			}
		})
	}
}
