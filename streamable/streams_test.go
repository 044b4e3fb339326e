package streamable_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/streamable"
)

// TestStreams: a client's oldest stream is ended for its newest beyond its
// bound, streams of no client are bounded in all only, a full count
// refuses, and a release gives the place back once.
func TestStreams(t *testing.T) {
	s := streamable.NewStreams(4, 2)
	var ended []int
	end := func(i int) func() { return func() { ended = append(ended, i) } }
	var releases []func()
	for i := range 3 {
		release, ok := s.Acquire("a", end(i))
		require.True(t, ok)
		releases = append(releases, release)
	}
	assert.Equal(t, []int{0}, ended, "the oldest was ended for the third")
	assert.Equal(t, 2, s.Open())
	releases[0]() // the ended one's handler returns: nothing more to give back
	assert.Equal(t, 2, s.Open())

	r1, ok := s.Acquire("", nil)
	require.True(t, ok)
	_, ok = s.Acquire("", nil)
	require.True(t, ok)
	_, ok = s.Acquire("", nil)
	assert.False(t, ok, "four open: one more is refused")
	_, ok = s.Acquire("b", end(9))
	assert.False(t, ok, "a new client too")
	_, ok = s.Acquire("a", end(3))
	assert.True(t, ok, "a client at its bound takes its oldest's place")
	assert.Equal(t, []int{0, 1}, ended)

	r1()
	r1()
	assert.Equal(t, 3, s.Open(), "a release counts once")
	var none *streamable.Streams
	release, ok := none.Acquire("a", nil)
	assert.True(t, ok, "no Streams bounds nothing")
	release()
}

// TestStreamableGETStreamsCounted: GET streams count among the long-lived
// streams; past the bound one more is refused 503 too_many_streams, and
// one that ends gives its place back.
func TestStreamableGETStreamsCounted(t *testing.T) {
	streams := streamable.NewStreams(2, 0)
	hs := startHTTPConfig(t, streamable.Config{Streams: streams})
	var gets []*http.Response
	for range 2 {
		resp := hs.do(t, "GET", "", "Mcp-Session-Id: "+hs.initialize(t), "Accept: text/event-stream")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		gets = append(gets, resp)
	}
	require.Eventually(t, func() bool { return streams.Open() == 2 }, 10*time.Second, 5*time.Millisecond)
	third := "Mcp-Session-Id: " + hs.initialize(t)
	resp := hs.do(t, "GET", "", third, "Accept: text/event-stream")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_, reason, _ := rpcError(t, resp)
	assert.Equal(t, "too_many_streams", reason)

	gets[0].Body.Close()
	require.Eventually(t, func() bool { return streams.Open() == 1 }, 10*time.Second, 5*time.Millisecond, "a closed stream gives its place back")
	resp = hs.do(t, "GET", "", third, "Accept: text/event-stream")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
