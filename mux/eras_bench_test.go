package mux

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/streamable"
	"github.com/mcpmux/mcpmux/upstream"
)

// BenchmarkEras measures one tools/call on a legacy server through each
// era, side by side in one run: a socket session of 2025-11-25 against a
// socket session of 2026-07-28 (the era bridge), and a POST of the 2025
// HTTP binding (on its Mcp-Session-Id) against a sessionless POST of the
// 2026-07-28 binding. Each sub-benchmark reports ns/op and allocs/op per
// call, mcpmux's own work with an in-process server.
func BenchmarkEras(b *testing.B) {
	hub := benchHub(b, "")
	b.Run("socket-legacy", func(b *testing.B) {
		c := benchSocket(b, hub)
		c.roundTrip(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		c.write(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		benchCalls(b, c.roundTrip, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	})
	b.Run("socket-modern", func(b *testing.B) {
		c := benchSocket(b, hub)
		benchCalls(b, c.roundTrip, modern("1", "tools/call", `{"name":"echo","arguments":{"text":"hello"}}`, "bench", `{"elicitation":{},"sampling":{}}`))
	})
	srv := benchHTTP(b, hub)
	b.Run("http-legacy", func(b *testing.B) {
		sid := srv.initialize(b)
		benchCalls(b, func(b *testing.B, body string) { srv.post(b, body, "Mcp-Session-Id", sid, headerVersion, "2025-11-25") },
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	})
	b.Run("http-modern", func(b *testing.B) {
		benchCalls(b, func(b *testing.B, body string) {
			srv.post(b, body, headerVersion, "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
		}, modern("1", "tools/call", `{"name":"echo","arguments":{"text":"hello"}}`, "bench", `{"elicitation":{},"sampling":{}}`))
	})
}

const headerVersion = "Mcp-Protocol-Version"

// BenchmarkErasInterleaved calls the legacy and the modern path of each
// transport in turn (A, B, A, B…), so that a loaded machine slows both
// alike, and reports the median of each's calls and the modern path's
// calls/s as a share of the legacy path's (x-legacy: the acceptance's
// figure, at least 0.85 for a sessionless POST and 0.8 for the bridge).
func BenchmarkErasInterleaved(b *testing.B) {
	hub := benchHub(b, "")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	mcall := modern("1", "tools/call", `{"name":"echo","arguments":{"text":"hello"}}`, "bench", `{"elicitation":{},"sampling":{}}`)
	b.Run("socket", func(b *testing.B) {
		legacy, bridged := benchSocket(b, hub), benchSocket(b, hub)
		legacy.roundTrip(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		legacy.write(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		benchPairs(b, func() { legacy.roundTrip(b, call) }, func() { bridged.roundTrip(b, mcall) })
	})
	// On a server of 2026-07-28 the bridge is the legacy session's (its
	// envelope put on, its answers shaped back) and the modern session's
	// path the plain one: x-legacy is then the plain path's share of the
	// bridge's calls/s, and its inverse the bridge's share of the plain one's.
	b.Run("socket-modern-server", func(b *testing.B) {
		hub := benchHub(b, "dual")
		legacy, plain := benchSocket(b, hub), benchSocket(b, hub)
		legacy.roundTrip(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		legacy.write(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		benchPairs(b, func() { legacy.roundTrip(b, call) }, func() { plain.roundTrip(b, mcall) })
	})
	b.Run("http", func(b *testing.B) {
		srv := benchHTTP(b, hub)
		sid := srv.initialize(b)
		benchPairs(b, func() { srv.post(b, call, "Mcp-Session-Id", sid, headerVersion, "2025-11-25") },
			func() {
				srv.post(b, mcall, headerVersion, "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
			})
	})
}

// benchPairs times legacy and modern calls in turn and reports their
// medians.
func benchPairs(b *testing.B, legacy, modern func()) {
	legacy()
	modern()
	var lt, mt []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		first, second, ft, st := legacy, modern, &lt, &mt
		if i%2 == 1 { // which goes first alternates too
			first, second, ft, st = modern, legacy, &mt, &lt
		}
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		*ft, *st = append(*ft, t1.Sub(t0)), append(*st, time.Since(t1))
	}
	l, m := median(lt), median(mt)
	b.ReportMetric(float64(l.Microseconds()), "legacy-µs")
	b.ReportMetric(float64(m.Microseconds()), "modern-µs")
	b.ReportMetric(float64(l)/float64(m), "x-legacy")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

func benchCalls(b *testing.B, call func(*testing.B, string), body string) {
	call(b, body) // the server is started and the path warm
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		call(b, body)
	}
}

// benchHub is a hub on a fake server of the given era ("": legacy; see
// fakeServer.era), run until b ends.
func benchHub(b *testing.B, era string) *Hub {
	srv := newFakeServer()
	srv.era = era
	// A real server lists its tools: the Streamable HTTP handler keeps the
	// list for the tools' parameter headers.
	srv.lists = map[string]string{"tools/list": `{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}`}
	hub := New(Config{Name: "fake", Upstream: upstream.Config{MaxMessageBytes: 1 << 20}, RestartBackoff: time.Millisecond, start: srv.start})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return hub
}

// benchClient is a socket session's client end.
type benchClient struct {
	conn net.Conn
	r    *jsonrpc.Reader
}

func benchSocket(b *testing.B, hub *Hub) *benchClient {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		hub.Serve(context.Background(), session.NewStream(conns[0], 1<<20), session.Peer{Transport: "bench"})
	})
	b.Cleanup(func() {
		conns[1].Close()
		wg.Wait()
	})
	return &benchClient{conn: conns[1], r: jsonrpc.NewReader(conns[1], 1<<20)}
}

func (c *benchClient) write(b *testing.B, line string) {
	if _, err := io.WriteString(c.conn, line+"\n"); err != nil {
		b.Fatal(err)
	}
}

// roundTrip sends a request and reads up to its answer.
func (c *benchClient) roundTrip(b *testing.B, line string) {
	c.write(b, line)
	for {
		frame, err := c.r.Read()
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(frame, []byte(`"id":`)) {
			if !bytes.Contains(frame, []byte(`"result"`)) {
				b.Fatalf("not a result: %s", frame)
			}
			return
		}
	}
}

// benchServer is the Streamable HTTP handler in front of a hub.
type benchServer struct {
	url    string
	client *http.Client
}

func benchHTTP(b *testing.B, hub *Hub) *benchServer {
	h := streamable.New(streamable.Config{})
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { h.Serve(rw, r, "fake", hub) }))
	b.Cleanup(func() {
		ts.Close()
		h.Close()
	})
	return &benchServer{url: ts.URL, client: ts.Client()}
}

// post sends body with the given header pairs and reads the whole answer,
// which must be a result.
func (s *benchServer) post(b *testing.B, body string, headers ...string) http.Header {
	req, err := http.NewRequest("POST", s.url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode/100 != 2 {
		b.Fatalf("status %d: %s (%v)", resp.StatusCode, got, err)
	}
	if strings.Contains(body, `"id"`) && !bytes.Contains(got, []byte(`"result"`)) {
		b.Fatalf("not a result: %s", got)
	}
	return resp.Header
}

// initialize opens an HTTP session of the 2025 binding.
func (s *benchServer) initialize(b *testing.B) string {
	h := s.post(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	sid := h.Get("Mcp-Session-Id")
	s.post(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", sid, headerVersion, "2025-11-25")
	return sid
}
