package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// wsPair upgrades one connection of a test HTTP server and returns the
// transport over its server end and the client end. Both are closed, and
// the server stopped, at cleanup.
func wsPair(t *testing.T, cfg session.WebSocketConfig) (*session.WebSocket, *websocket.Conn) {
	t.Helper()
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = 1 << 20
	}
	conns := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := websocket.Upgrader{}
		c, err := u.Upgrade(w, r, nil)
		if err == nil {
			conns <- c
		}
	}))
	t.Cleanup(srv.Close)
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err, "dial")
	t.Cleanup(func() { client.Close() })
	var server *websocket.Conn
	select {
	case server = <-conns:
	case <-time.After(10 * time.Second):
		t.Fatal("no upgrade")
	}
	tr := session.NewWebSocket(server, cfg)
	t.Cleanup(func() { tr.Close() })
	return tr, client
}

// wsRead is ReadFrame with a deadline, for the test goroutine.
func wsRead(t *testing.T, tr *session.WebSocket) ([]byte, error) {
	t.Helper()
	type result struct {
		frame []byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		f, _, err := tr.ReadFrame()
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		return r.frame, r.err
	case <-time.After(10 * time.Second):
		tr.Close()
		<-done
		t.Fatal("ReadFrame did not return")
		return nil, nil
	}
}

func TestWebSocketTextFrames(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{})
	require.NoError(t, client.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
	frame, err := wsRead(t, tr)
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, string(frame))

	require.NoError(t, tr.WriteFrames(data(`{"jsonrpc":"2.0","id":1,"result":{}}`)))
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, got, err := client.ReadMessage()
	require.NoError(t, err)
	assert.Equal(t, websocket.TextMessage, typ)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, string(got))
}

// TestWebSocketLineBreaks: a message may carry line breaks as JSON
// whitespace; they become spaces (offsets kept), so that it stays one line
// on its way to a stdio server. Escaped breaks in strings are untouched,
// and whitespace-only messages are skipped as blank lines are.
func TestWebSocketLineBreaks(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{})
	for _, m := range []string{" \r\n\t", "{\r\n\"id\":1,\n\"s\":\"a\\nb\\\"\\r\"\n}"} {
		require.NoError(t, client.WriteMessage(websocket.TextMessage, []byte(m)))
	}
	frame, err := wsRead(t, tr)
	require.NoError(t, err)
	assert.Equal(t, "{  \"id\":1, \"s\":\"a\\nb\\\"\\r\" }", string(frame))
}

// TestWebSocketBinaryFrameCloses1003: a binary frame ends the connection
// with close code 1003, as the WebSocket SEP draft says.
func TestWebSocketBinaryFrameCloses1003(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{})
	require.NoError(t, client.WriteMessage(websocket.BinaryMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
	_, err := wsRead(t, tr)
	assert.ErrorIs(t, err, session.ErrBinaryFrame)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = client.ReadMessage()
	var ce *websocket.CloseError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, websocket.CloseUnsupportedData, ce.Code)
}

// TestWebSocketClientCloseIsEOF: the client's close frame is a hang-up.
func TestWebSocketClientCloseIsEOF(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{})
	require.NoError(t, client.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye")))
	_, err := wsRead(t, tr)
	assert.ErrorIs(t, err, io.EOF)
	require.NoError(t, tr.Close())
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = client.ReadMessage()
	assert.True(t, websocket.IsCloseError(err, websocket.CloseNormalClosure), "the server's close frame: %v", err)
}

// TestWebSocketPongTimeout: while a message is awaited, a client that
// answers no ping is disconnected; one that answers stays.
func TestWebSocketPongTimeout(t *testing.T) {
	cfg := session.WebSocketConfig{PingInterval: 20 * time.Millisecond, PongTimeout: 200 * time.Millisecond}

	t.Run("silent client", func(t *testing.T) {
		tr, _ := wsPair(t, cfg) // the client never reads, so it never pongs
		start := time.Now()
		_, err := wsRead(t, tr)
		assert.ErrorIs(t, err, session.ErrPongTimeout)
		t.Logf("disconnected after %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("answering client", func(t *testing.T) {
		tr, client := wsPair(t, cfg)
		readerDone := make(chan struct{})
		go func() { // the client's reader answers pings
			defer close(readerDone)
			for {
				if _, _, err := client.ReadMessage(); err != nil {
					return
				}
			}
		}()
		time.AfterFunc(time.Second, func() {
			client.WriteMessage(websocket.TextMessage, []byte(`{"late":true}`))
		})
		frame, err := wsRead(t, tr)
		require.NoError(t, err, "a client that answers pings stays connected")
		assert.Equal(t, `{"late":true}`, string(frame))
		client.Close()
		<-readerDone
	})
}

// TestWebSocketOversizedMessage: a 20 MB message is read through, answered
// message_too_large under its id by the session, and the session serves the
// next request.
func TestWebSocketOversizedMessage(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{MaxMessageBytes: 1 << 20})
	sess := session.New(session.Config{Server: "srv"}, tr)
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- sess.Run(ctx, wsEcho{}) }()
	t.Cleanup(func() {
		cancel()
		<-runErr
	})

	big := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"pad":"%s"}}`, strings.Repeat("x", 20<<20))
	require.NoError(t, client.WriteMessage(websocket.TextMessage, big))
	require.NoError(t, client.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":"next","method":"tools/call"}`)))

	client.SetReadDeadline(time.Now().Add(20 * time.Second))
	var answers []string
	for range 2 {
		_, msg, err := client.ReadMessage()
		require.NoError(t, err)
		var a struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  struct {
				Code int `json:"code"`
				Data struct {
					Reason string `json:"reason"`
				} `json:"data"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(msg, &a), "%s", msg)
		answers = append(answers, fmt.Sprintf("%s %s %d %s", a.ID, a.Result, a.Error.Code, a.Error.Data.Reason))
	}
	assert.Equal(t, []string{
		`"big"  -32600 ` + jsonrpc.ReasonTooLarge,
		`"next" {"echo":true} 0 `,
	}, answers)
}

// TestWebSocketSlowClientEvicted: the slow-client rule holds over
// WebSocket as over a socket: a client that stops reading while answers
// pile up past OutboxMax is disconnected with ErrSlowClient.
func TestWebSocketSlowClientEvicted(t *testing.T) {
	tr, client := wsPair(t, session.WebSocketConfig{})
	sess := session.New(session.Config{Server: "srv", OutboxHighWater: 64 << 10, OutboxMax: 1 << 20}, tr)
	flood := wsFlood{answer: fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"n","params":"%s"}`, strings.Repeat("x", 256<<10))}
	runErr := make(chan error, 1)
	go func() { runErr <- sess.Run(t.Context(), flood) }()
	require.NoError(t, client.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"flood"}`)))
	select {
	case err := <-runErr:
		assert.ErrorIs(t, err, session.ErrSlowClient)
	case <-time.After(20 * time.Second):
		sess.Close(nil)
		<-runErr
		t.Fatal("a client that does not read was not evicted")
	}
}

// wsFlood answers a request with 400 notifications of 256 KiB: far more
// than the socket buffers and the outbox hold together.
type wsFlood struct{ answer []byte }

func (f wsFlood) HandleMessage(s *session.Session, m *jsonrpc.Message, _ uint64) {
	for range 400 {
		if s.Send(outbox.Frame{Data: f.answer}) != nil {
			return
		}
	}
}
func (wsFlood) HandleBatch(*session.Session, []byte, uint64) {}
func (wsFlood) Flush()                                       {}
func (wsFlood) WaitRoom(ctx context.Context) error           { return nil }

// wsEcho answers every request with {"echo":true}.
type wsEcho struct{}

func (wsEcho) HandleMessage(s *session.Session, m *jsonrpc.Message, _ uint64) {
	if m.Kind == jsonrpc.KindRequest {
		s.Send(outbox.Frame{Data: jsonrpc.Response(m.ID, json.RawMessage(`{"echo":true}`))})
	}
}
func (wsEcho) HandleBatch(*session.Session, []byte, uint64) {}
func (wsEcho) Flush()                                       {}
func (wsEcho) WaitRoom(ctx context.Context) error           { return nil }

// TestReadMessage: jsonrpc.ReadMessage, which the WebSocket transport reads
// each message with, keeps messages up to the limit and reports longer ones
// with the id the skipping scan found.
func TestReadMessage(t *testing.T) {
	const limit = 64
	pad := func(n int) string { return strings.Repeat("p", n) }
	tests := []struct {
		name string
		msg  string
		want string // the message, or "too large SIZE ID"
	}{
		{"exactly the limit", `{"id":1,"p":"` + pad(limit-15) + `"}`, `{"id":1,"p":"` + pad(limit-15) + `"}`},
		{"one byte over, id first", `{"id":1,"p":"` + pad(limit-14) + `"}`, "too large 65 1"},
		{"id after the padding", `{"p":"` + pad(1000) + `","id":"x"}`, "too large 1017 \"x\""},
		{"nested id is not the id", `{"p":{"id":2,"q":"` + pad(100) + `"}}`, "too large 121 "},
		{"not an object", `[` + pad(100) + `]`, "too large 102 "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonrpc.ReadMessage(strings.NewReader(tt.msg), limit)
			var tooLarge *jsonrpc.TooLargeError
			if errors.As(err, &tooLarge) {
				assert.Equal(t, tt.want, fmt.Sprintf("too large %d %s", tooLarge.Size, tooLarge.ID), "message %.40q", tt.msg)
				assert.Equal(t, limit, tooLarge.Limit)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}
