//go:build unix

package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// got is what the tests compare of a handler event.
type got struct {
	Batch  bool
	Kind   string
	Method string
	ID     string
	Frame  string
}

func gotOf(e event) got {
	if e.batch {
		return got{Batch: true, Frame: string(e.frame)}
	}
	return got{Kind: e.msg.Kind.String(), Method: e.msg.Method, ID: string(e.msg.ID), Frame: string(e.msg.Frame)}
}

func TestMessagesReachHandlerInOrder(t *testing.T) {
	frames := []struct {
		line string
		want got
	}{
		{request(`1`, "a"), got{Kind: "request", Method: "a", ID: `1`}},
		{request(`"1"`, "b"), got{Kind: "request", Method: "b", ID: `"1"`}},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, got{Kind: "notification", Method: "notifications/initialized"}},
		{`  [{"jsonrpc":"2.0","id":2,"method":"c"},{"jsonrpc":"2.0","method":"d"}]`, got{Batch: true}},
		{request(`123456789012345678901234567890`, "big"), got{Kind: "request", Method: "big", ID: `123456789012345678901234567890`}},
		{`{"jsonrpc":"2.0","id":"srv-7","result":{}}`, got{Kind: "result", ID: `"srv-7"`}},
		{`{"jsonrpc":"2.0","id":-3,"error":{"code":1,"message":"no"}}`, got{Kind: "error", ID: `-3`}},
		{"\r\n   \t", got{}}, // blank: skipped by the reader, nothing to handle
		{`{"id":"a\"b","jsonrpc":"2.0","method":"e","params":{"x":[1,2]}}` + "\r", got{Kind: "request", Method: "e", ID: `"a\"b"`}},
	}
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
				if m.Method == "ping" {
					echo(s, m)
				}
			}
			hs := start(t, ct, session.Config{}, h, 0)
			var want []got
			for _, f := range frames {
				hs.send(f.line)
				if f.want == (got{}) {
					continue
				}
				w := f.want
				w.Frame = strings.TrimRight(f.line, "\r")
				want = append(want, w)
			}
			for i, w := range want {
				assert.Equal(t, w, gotOf(h.next(t, fmt.Sprintf("frame %d", i))), "frame %d: %s", i, w.Frame)
			}
			// The session wrote nothing of its own: the first line the
			// client reads is the answer to this request.
			hs.send(request(`"last"`, "ping"))
			h.nextMessage(t, "ping")
			assert.Equal(t, answer{JSONRPC: "2.0", ID: `"last"`, Result: `"ok"`}, hs.readAnswer("ping answer"))
			assert.Nil(t, hs.sess.Err(), "Err while running")
		})
	}
}

func TestMalformedFramesAnsweredBySession(t *testing.T) {
	tests := []struct {
		name  string
		frame string
		want  answer
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, errAnswer(`null`, -32700, "parse_error")},
		{"not JSON at all", `hello`, errAnswer(`null`, -32700, "parse_error")},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", errAnswer(`null`, -32700, "parse_error")},
		{"bare number", `42`, errAnswer(`null`, -32600, "invalid_request")},
		{"bare string", `"hi"`, errAnswer(`null`, -32600, "invalid_request")},
		{"bare null", `null`, errAnswer(`null`, -32600, "invalid_request")},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":7,"method":"x"}`, errAnswer(`7`, -32600, "invalid_request")},
		{"jsonrpc missing", `{"id":"a","method":"x"}`, errAnswer(`"a"`, -32600, "invalid_request")},
		{"jsonrpc a number", `{"jsonrpc":2.0,"id":"b","method":"x"}`, errAnswer(`"b"`, -32600, "invalid_request")},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"x"}`, errAnswer(`null`, -32600, "invalid_request")},
		{"id a float", `{"jsonrpc":"2.0","id":1.5,"method":"x"}`, errAnswer(`null`, -32600, "invalid_request")},
		{"id an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, errAnswer(`null`, -32600, "invalid_request")},
		{"id twice", `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, errAnswer(`null`, -32600, "invalid_request")},
		{"miscased member", `{"jsonrpc":"2.0","id":3,"Method":"x"}`, errAnswer(`3`, -32600, "invalid_request")},
		{"big id kept verbatim", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":7}`, errAnswer(`123456789012345678901234567890`, -32600, "invalid_request")},
		{"string id kept verbatim", `{"jsonrpc":"2.0","id":"x\u0041\"y","params":1,"method":"m"}`, errAnswer(`"x\u0041\"y"`, -32600, "invalid_request")},
		{"no method, result or error", `{"jsonrpc":"2.0","id":4}`, errAnswer(`4`, -32600, "invalid_request")},
		{"batch cut short", `[{"jsonrpc":"2.0","id":1,"method":"x"}`, errAnswer(`null`, -32700, "parse_error")},
		{"batch with invalid UTF-8", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xfe\"}]", errAnswer(`null`, -32700, "parse_error")},
	}
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					h := newFakeHandler()
					hs := start(t, ct, session.Config{}, h, 0)
					hs.send(tt.frame, request(`"after"`, "next"))
					assert.Equal(t, tt.want, hs.readAnswer(tt.name), "answer to %q", tt.frame)
					m := h.nextMessage(t, "the message after "+tt.name)
					assert.Equal(t, got{Kind: "request", Method: "next", ID: `"after"`, Frame: request(`"after"`, "next")},
						gotOf(event{msg: m}), "the frame after %q must reach the handler, and nothing before it", tt.frame)
				})
			}
		})
	}
}

func TestOversizedFrameAnsweredAndSkipped(t *testing.T) {
	const limit = 1024
	pad := strings.Repeat("p", 2*limit)
	// sized is a valid request with id 5 of exactly n bytes.
	sized := func(n int) string {
		head, tail := `{"jsonrpc":"2.0","id":5,"method":"x","params":{"p":"`, `"}}`
		return head + pad[:n-len(head)-len(tail)] + tail
	}
	tests := []struct {
		name  string
		frame string
		want  answer
	}{
		{"id first", `{"jsonrpc":"2.0","id":"big-1","method":"x","params":{"p":"` + pad + `"}}`, errAnswer(`"big-1"`, -32600, "message_too_large")},
		{"id last", `{"jsonrpc":"2.0","method":"x","params":{"p":"` + pad + `"},"id":99}`, errAnswer(`99`, -32600, "message_too_large")},
		{"nested id is not the id", `{"jsonrpc":"2.0","method":"x","params":{"id":5,"p":"` + pad + `"}}`, errAnswer(`null`, -32600, "message_too_large")},
		{"no id", `{"jsonrpc":"2.0","method":"x","params":{"p":"` + pad + `"}}`, errAnswer(`null`, -32600, "message_too_large")},
		{"not JSON", pad, errAnswer(`null`, -32600, "message_too_large")},
		{"one byte over", sized(limit + 1), errAnswer(`5`, -32600, "message_too_large")},
	}
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					require.Greater(t, len(tt.frame), limit, "precondition: the frame is oversized")
					h := newFakeHandler()
					hs := start(t, ct, session.Config{}, h, limit)
					hs.send(tt.frame, request(`"after"`, "next"))
					assert.Equal(t, tt.want, hs.readAnswer(tt.name), "answer to a frame of %d bytes", len(tt.frame))
					m := h.nextMessage(t, "the message after "+tt.name)
					assert.Equal(t, `"after"`, string(m.ID), "the frame after the oversized one")
				})
			}
			t.Run("exactly at the limit", func(t *testing.T) {
				frame := sized(limit)
				require.Len(t, frame, limit)
				h := newFakeHandler()
				start(t, ct, session.Config{}, h, limit).send(frame)
				assert.Equal(t, frame, string(h.nextMessage(t, "a frame at the limit").Frame))
			})
		})
	}
}

func TestHandlerPanicAnswersThatMessage(t *testing.T) {
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
				if strings.HasPrefix(m.Method, "boom") {
					panic("boom: " + m.Method)
				}
				echo(s, m)
			}
			h.onBatch = func(*session.Session, []byte) { panic("batch boom") }
			hs := start(t, ct, session.Config{}, h, 0)

			hs.send(request(`"p-1"`, "boom"), request(`2`, "fine"))
			assert.Equal(t, errAnswer(`"p-1"`, -32603, "internal_error"), hs.readAnswer("answer to the panicking request"))
			assert.Equal(t, answer{JSONRPC: "2.0", ID: `2`, Result: `"ok"`}, hs.readAnswer("answer to the next request"))

			hs.send(`[{"jsonrpc":"2.0","id":3,"method":"x"}]`)
			assert.Equal(t, errAnswer(`null`, -32603, "internal_error"), hs.readAnswer("answer to the panicking batch"))

			// A notification has no answer, even when its handling panics;
			// the next line the client sees answers the next request.
			hs.send(`{"jsonrpc":"2.0","method":"boom/notified"}`, `{"jsonrpc":"2.0","id":"r","result":{}}`, request(`4`, "fine"))
			assert.Equal(t, answer{JSONRPC: "2.0", ID: `4`, Result: `"ok"`}, hs.readAnswer("answer after a panicking notification"))

			for i := range 6 {
				h.next(t, fmt.Sprintf("event %d", i))
			}
			assert.Nil(t, hs.sess.Err(), "the session lives on")
		})
	}
}

func TestMaxInflightPausesReading(t *testing.T) {
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			h.onMessage = func(s *session.Session, m *jsonrpc.Message) { s.Begin() }
			hs := start(t, ct, session.Config{MaxInflight: 2}, h, 0)

			hs.send(request(`1`, "a"), request(`2`, "b"), request(`3`, "c"), request(`4`, "d"))
			assert.Equal(t, `1`, string(h.nextMessage(t, "request 1").ID))
			assert.Equal(t, `2`, string(h.nextMessage(t, "request 2").ID))
			h.none(t, "two requests are in flight, the limit")
			assert.Equal(t, 2, hs.sess.Inflight(), "Inflight with the reader paused")

			hs.sess.End()
			assert.Equal(t, `3`, string(h.nextMessage(t, "request 3 after End").ID))
			h.none(t, "two requests in flight again")

			hs.sess.End()
			hs.sess.End()
			assert.Equal(t, `4`, string(h.nextMessage(t, "request 4 after End").ID))
			// The handler's Begin for request 4 runs just after the event.
			assert.Eventually(t, func() bool { return hs.sess.Inflight() == 1 }, waitLong, time.Millisecond, "Inflight after request 4")
		})
	}
}

func TestOutboxHighWaterPausesReading(t *testing.T) {
	// The answers are far larger than a socket's kernel buffer, so the
	// writer is stuck inside the first one until the client reads.
	const answerSize = 1 << 20
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
				assert.NoError(t, s.Send(outbox.Frame{Data: result(string(m.ID), answerSize)}), "Send answer to %s", m.ID)
			}
			hs := start(t, ct, session.Config{OutboxHighWater: 64 << 10, OutboxMax: 64 << 20}, h, 0)

			hs.send(request(`1`, "a"), request(`2`, "b"), request(`3`, "c"))
			assert.Equal(t, `1`, string(h.nextMessage(t, "request 1").ID))
			h.none(t, "the outbox is above its high-water mark")

			assert.Equal(t, string(result(`1`, answerSize)), string(hs.readLine("answer 1")))
			assert.Equal(t, `2`, string(h.nextMessage(t, "request 2 once the client read").ID))
			h.none(t, "the outbox is above its high-water mark again")

			assert.Equal(t, string(result(`2`, answerSize)), string(hs.readLine("answer 2")))
			assert.Equal(t, `3`, string(h.nextMessage(t, "request 3").ID))
			assert.Equal(t, string(result(`3`, answerSize)), string(hs.readLine("answer 3")))
			assert.Nil(t, hs.sess.Err(), "flow control never ends a session")
		})
	}
}

func TestSlowClientEvicted(t *testing.T) {
	const outboxMax = 64 << 10
	frame := outbox.Frame{Data: result(`1`, 16<<10)}
	for _, ct := range connTypes {
		for _, from := range []string{"outside", "handler"} {
			t.Run(ct.name+"/send from "+from, func(t *testing.T) {
				h := newFakeHandler()
				sendErr := make(chan error, 1)
				// sendUntilRefused sends until Send refuses, as an upstream
				// reader would; a socket's kernel buffer takes some first.
				sendUntilRefused := func(s *session.Session) {
					for range 1 << 16 { // 1 GiB, far past any kernel buffer
						if err := s.Send(frame); err != nil {
							sendErr <- err
							return
						}
					}
					sendErr <- nil
				}
				h.onMessage = func(s *session.Session, _ *jsonrpc.Message) { sendUntilRefused(s) }
				hs := start(t, ct, session.Config{OutboxHighWater: 16 << 10, OutboxMax: outboxMax}, h, 0)
				if from == "outside" {
					go sendUntilRefused(hs.sess)
				} else {
					hs.send(request(`1`, "flood"))
				}
				var err error
				select {
				case err = <-sendErr:
				case <-time.After(waitLong):
					require.FailNow(t, "Send never refused")
				}
				assert.ErrorIs(t, err, session.ErrSlowClient, "Send past OutboxMax")
				hs.waitDone("eviction")
				assert.ErrorIs(t, hs.wait("eviction"), session.ErrSlowClient, "Run after eviction")
				assert.Equal(t, session.ErrSlowClient, hs.sess.Err())
				assert.ErrorIs(t, hs.sess.Send(frame), session.ErrClosed, "Send after eviction")
				hs.drainToEOF("eviction")
			})
		}
	}
}

func TestRunReturnsNilOnClientEOF(t *testing.T) {
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			h.onMessage = echo
			hs := start(t, ct, session.Config{}, h, 0)
			hs.send(request(`1`, "a"))
			assert.Equal(t, answer{JSONRPC: "2.0", ID: `1`, Result: `"ok"`}, hs.readAnswer("answer"))
			require.NoError(t, hs.client.Close())
			assert.NoError(t, hs.wait("the client closed"))
			assert.ErrorIs(t, hs.sess.Err(), io.EOF)
		})
	}
}

func TestHalfClosedClientGetsQueuedAnswers(t *testing.T) {
	// Four answers of 128 KiB, more than a socket's kernel buffer: some are
	// still in the outbox when the session sees EOF, since the client reads
	// only after that. The client must read them all within the flush
	// timeout (2s), so the expected lines are built beforehand.
	const n, size = 4, 128 << 10
	h := newFakeHandler()
	h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
		assert.NoError(t, s.Send(outbox.Frame{Data: result(string(m.ID), size)}), "Send answer to %s", m.ID)
	}
	hs := start(t, connType{"socketpair", socketPair}, session.Config{OutboxHighWater: 16 << 20, OutboxMax: 32 << 20}, h, 0)
	uc, ok := hs.client.(*net.UnixConn)
	require.True(t, ok, "client is a %T", hs.client)
	for i := range n {
		_, err := uc.Write([]byte(request(fmt.Sprint(i), "get") + "\n"))
		require.NoError(t, err)
	}
	require.NoError(t, uc.CloseWrite())
	want := make([]string, n)
	for i := range want {
		want[i] = string(result(fmt.Sprint(i), size))
	}
	hs.waitDone("the client half-closed")
	assert.ErrorIs(t, hs.sess.Err(), io.EOF)

	got := make([]string, n)
	for i := range got {
		got[i] = string(hs.readLine(fmt.Sprintf("answer %d", i)))
	}
	assert.Equal(t, want, got, "answers after the half-close")
	hs.drainToEOF("the flush")
	assert.NoError(t, hs.wait("the client half-closed"))
}

func TestHalfClosedClientThatDoesNotReadIsClosed(t *testing.T) {
	// The flush after a half-close is bounded (2s in session.go): a client
	// that sends EOF and then never reads must not hold the session open.
	h := newFakeHandler()
	h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
		assert.NoError(t, s.Send(outbox.Frame{Data: result(string(m.ID), 4<<20)}), "Send answer to %s", m.ID)
	}
	// The high-water mark is above the answer, so the reader reads on and
	// sees the EOF (below it, flow control would stop it reading at all).
	hs := start(t, connType{"socketpair", socketPair}, session.Config{OutboxHighWater: 8 << 20, OutboxMax: 64 << 20}, h, 0)
	uc := hs.client.(*net.UnixConn)
	_, err := uc.Write([]byte(request(`1`, "get") + "\n"))
	require.NoError(t, err)
	h.nextMessage(t, "the request")
	require.NoError(t, uc.CloseWrite())
	began := time.Now()
	assert.NoError(t, hs.wait("a half-close by a client that does not read"))
	assert.Less(t, time.Since(began), 8*time.Second, "Run should end soon after the flush timeout")
	assert.ErrorIs(t, hs.sess.Err(), io.EOF)
}

// blockedWriter makes the session's writer block inside a write: the client
// is sent an answer larger than any kernel buffer and does not read it.
func blockedWriter(t *testing.T, ct connType, cfg session.Config) *harness {
	h := newFakeHandler()
	sent := make(chan struct{})
	h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
		s.Send(outbox.Frame{Data: result(`1`, 4<<20)})
		close(sent)
	}
	hs := start(t, ct, cfg, h, 0)
	hs.send(request(`1`, "big"))
	select {
	case <-sent:
	case <-time.After(waitLong):
		require.FailNow(t, "the handler did not send")
	}
	return hs
}

func TestContextCancelEndsRun(t *testing.T) {
	for _, ct := range connTypes {
		for _, blocked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/writer blocked=%v", ct.name, blocked), func(t *testing.T) {
				var hs *harness
				if blocked {
					hs = blockedWriter(t, ct, session.Config{OutboxMax: 64 << 20})
				} else {
					hs = start(t, ct, session.Config{}, newFakeHandler(), 0)
				}
				began := time.Now()
				hs.cancel()
				assert.ErrorIs(t, hs.wait("cancel"), context.Canceled, "Run after cancel")
				assert.Less(t, time.Since(began), 3*time.Second, "Run should end promptly")
				assert.ErrorIs(t, hs.sess.Err(), context.Canceled)
				hs.drainToEOF("cancel")
			})
		}
	}
}

func TestRunReturnsContextCause(t *testing.T) {
	watchdog(t)
	cause := errors.New("daemon stopping")
	server, client := socketPair(t)
	defer client.Close()
	sess := session.New(session.Config{}, session.NewStream(server, 1<<20))
	ctx, cancel := context.WithCancelCause(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- sess.Run(ctx, newFakeHandler()) }()
	cancel(cause)
	select {
	case err := <-runErr:
		assert.ErrorIs(t, err, cause, "Run after cancel with a cause")
	case <-time.After(waitLong):
		require.FailNow(t, "Run did not return")
	}
	assert.Equal(t, cause, sess.Err())
}

func TestCloseBeforeRun(t *testing.T) {
	watchdog(t)
	server, client := socketPair(t)
	defer client.Close()
	sess := session.New(session.Config{}, session.NewStream(server, 1<<20))
	reason := errors.New("refused")
	sess.Close(reason)
	assert.Equal(t, reason, sess.Err())
	runErr := make(chan error, 1)
	go func() { runErr <- sess.Run(t.Context(), newFakeHandler()) }()
	select {
	case err := <-runErr:
		assert.ErrorIs(t, err, reason, "Run of a closed session")
	case <-time.After(waitLong):
		require.FailNow(t, "Run of a closed session did not return")
	}
	require.NoError(t, client.SetReadDeadline(time.Now().Add(waitLong)))
	n, err := client.Read(make([]byte, 1))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF, "the transport is closed")
}

func TestCloseEndsRunWithReason(t *testing.T) {
	shutdown := errors.New("daemon shutting down")
	for _, ct := range connTypes {
		for _, blocked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/writer blocked=%v", ct.name, blocked), func(t *testing.T) {
				var hs *harness
				if blocked {
					hs = blockedWriter(t, ct, session.Config{OutboxMax: 64 << 20})
				} else {
					hs = start(t, ct, session.Config{}, newFakeHandler(), 0)
				}
				began := time.Now()
				hs.sess.Close(shutdown)
				hs.sess.Close(errors.New("second reason")) // idempotent: the first wins
				hs.waitDone("Close")
				assert.Equal(t, shutdown, hs.sess.Err())
				assert.ErrorIs(t, hs.wait("Close"), shutdown, "Run after Close")
				assert.Less(t, time.Since(began), 3*time.Second, "Run should end promptly")
				assert.ErrorIs(t, hs.sess.Send(outbox.Frame{Data: []byte(`{}`)}), session.ErrClosed, "Send after Close")
				hs.drainToEOF("Close")
			})
		}
	}
	t.Run("nil reason", func(t *testing.T) {
		hs := start(t, connTypes[0], session.Config{}, newFakeHandler(), 0)
		hs.sess.Close(nil)
		assert.ErrorIs(t, hs.wait("Close(nil)"), session.ErrClosed)
		assert.Equal(t, session.ErrClosed, hs.sess.Err())
	})
}

func TestWaitRoomBlocksReading(t *testing.T) {
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			h := newFakeHandler()
			gate := make(chan struct{}) // one token per read
			var calls atomic.Int32
			h.waitRoom = func(ctx context.Context) error {
				calls.Add(1)
				select {
				case <-gate:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			hs := start(t, ct, session.Config{}, h, 0)
			hs.send(request(`1`, "a"), request(`2`, "b"))
			h.none(t, "WaitRoom has not returned yet")

			open := func() {
				select {
				case gate <- struct{}{}:
				case <-time.After(waitLong):
					require.FailNow(t, "the session did not call WaitRoom")
				}
			}
			open()
			assert.Equal(t, `1`, string(h.nextMessage(t, "request 1").ID))
			h.none(t, "WaitRoom is blocking again")
			open()
			assert.Equal(t, `2`, string(h.nextMessage(t, "request 2").ID))
			assert.GreaterOrEqual(t, calls.Load(), int32(2))
		})
	}
}

func TestSendBeforeRunAndAfterClose(t *testing.T) {
	watchdog(t)
	server, client := socketPair(t)
	defer client.Close()
	sess := session.New(session.Config{}, session.NewStream(server, 1<<20))
	require.NoError(t, sess.Send(outbox.Frame{Data: []byte(`{"early":1}`)}), "Send before Run queues")
	assert.Nil(t, sess.Err())

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- sess.Run(ctx, newFakeHandler()) }()
	line := make([]byte, len(`{"early":1}`)+1)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(waitLong)))
	_, err := io.ReadFull(client, line)
	require.NoError(t, err)
	assert.Equal(t, "{\"early\":1}\n", string(line))

	sess.Close(nil)
	select {
	case err := <-runErr:
		assert.ErrorIs(t, err, session.ErrClosed)
	case <-time.After(waitLong):
		require.FailNow(t, "Run did not return")
	}
	assert.ErrorIs(t, sess.Send(outbox.Frame{Data: []byte(`{}`)}), session.ErrClosed, "Send after close")
}

// TestConcurrentSend sends numbered frames from many goroutines, each
// mixing Send, SendLater and Flush: every frame reaches the client whole,
// once, and each goroutine's frames in the order it sent them. Some frames
// are over the size the Stream gathers into one buffer.
func TestConcurrentSend(t *testing.T) {
	const senders, each = 16, 300
	padOf := func(g, i int) int {
		if i%50 == 49 {
			return 9000 // written from its own slice
		}
		return 10 + (g*each+i)%7*300
	}
	for _, ct := range connTypes {
		t.Run(ct.name, func(t *testing.T) {
			hs := start(t, ct, session.Config{OutboxHighWater: 8 << 20, OutboxMax: 64 << 20}, newFakeHandler(), 0)
			var wg sync.WaitGroup
			errs := make(chan error, senders)
			for g := range senders {
				wg.Go(func() {
					for i := range each {
						f := outbox.Frame{Data: fmt.Appendf(nil, `{"g":%d,"i":%d,"pad":"%s"}`, g, i, strings.Repeat("p", padOf(g, i)))}
						var err error
						switch i % 4 {
						case 0:
							err = hs.sess.Send(f)
						case 1, 2:
							err = hs.sess.SendLater(f) // out with the next Send or Flush, anyone's
						case 3:
							err = hs.sess.SendLater(f)
							hs.sess.Flush()
						}
						if err != nil {
							errs <- fmt.Errorf("sender %d, frame %d: %w", g, i, err)
							return
						}
					}
					hs.sess.Flush()
				})
			}
			next := make([]int, senders) // each sender's frames arrive in its order
			for n := range senders * each {
				var f struct {
					G, I int
					Pad  string
				}
				line := hs.readLine(fmt.Sprintf("frame %d of %d", n+1, senders*each))
				require.NoError(t, json.Unmarshal(line, &f), "a torn or interleaved frame: %.200q", line)
				require.Less(t, f.G, senders, "frame %.100q", line)
				require.Equal(t, next[f.G], f.I, "sender %d's frames out of order", f.G)
				require.Len(t, f.Pad, padOf(f.G, f.I), "frame %d of sender %d", f.I, f.G)
				next[f.G]++
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.NoError(t, err)
			}
			assert.Eventually(t, func() bool { return hs.sess.Stats().Queued == 0 }, waitLong, time.Millisecond, "the outbox drains")
			assert.Nil(t, hs.sess.Err())
		})
	}
}

func TestConcurrentSendAndClose(t *testing.T) {
	hs := start(t, connTypes[0], session.Config{}, newFakeHandler(), 0)
	go io.Copy(io.Discard, hs.client) // ends when the session closes the connection
	var wg sync.WaitGroup
	var sent, refused atomic.Int64
	for range 16 {
		wg.Go(func() {
			for range 1000 {
				switch err := hs.sess.Send(outbox.Frame{Data: []byte(`{"x":1}`)}); {
				case err == nil:
					sent.Add(1)
				case errors.Is(err, session.ErrClosed):
					refused.Add(1)
				default:
					t.Errorf("Send: %v", err)
					return
				}
			}
		})
	}
	hs.sess.Close(nil)
	wg.Wait()
	assert.ErrorIs(t, hs.wait("Close"), session.ErrClosed)
	assert.Equal(t, int64(16*1000), sent.Load()+refused.Load())
}

func TestIdleSessionMemory(t *testing.T) {
	watchdog(t)
	n := int64(2000) // MCPMUX_IDLE_SESSIONS=10000 measures as issue 32 does, given the descriptors
	if v, err := strconv.Atoi(os.Getenv("MCPMUX_IDLE_SESSIONS")); err == nil && v > 0 {
		n = int64(v)
	}
	if testing.Short() {
		t.Skip("opens 4,000 descriptors")
	}
	var handled atomic.Int64
	h := countingHandler{&handled}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	clients := make([]net.Conn, 0, n)
	defer func() {
		cancel()
		wg.Wait()
		for _, c := range clients {
			c.Close()
		}
	}()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	for range n {
		server, client := socketPair(t)
		clients = append(clients, client)
		sess := session.New(session.Config{}, session.NewStream(server, 1<<20))
		wg.Go(func() { sess.Run(ctx, h) })
		_, err := client.Write([]byte(request(`1`, "ping") + "\n"))
		require.NoError(t, err)
	}
	// Every session has read (so its buffers exist) and is idle again.
	deadline := time.Now().Add(time.Minute)
	for handled.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.EqualValues(t, n, handled.Load(), "sessions that read their first message")
	// One goroutine per idle session: its read loop. Its writer runs only
	// while it has something to write.
	perSession := float64(runtime.NumGoroutine()-goroutines) / float64(n)
	runtime.GC()
	runtime.ReadMemStats(&after)

	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	stacks := int64(after.StackInuse) - int64(before.StackInuse)
	per := (heap + stacks) / n
	t.Logf("%d idle sessions: heap %d B/session, stacks %d B/session, total %d B/session (both ends of each socket pair counted), %.2f goroutines/session",
		n, heap/n, stacks/n, per, perSession)
	assert.InDelta(t, 1, perSession, 0.01, "goroutines per idle session")
	assert.Less(t, per, int64(64<<10), "bytes per idle session")
	// 3.1 KiB of heap: the read buffer starts at 512 bytes, a write's
	// buffer is pooled, and the end of a session is a channel and a
	// goroutine started when it comes, not two contexts of its own (4.0
	// KiB before those two).
	assert.Less(t, heap/n, int64(3584), "heap bytes per idle session")
}

// countingHandler counts messages and does nothing else.
type countingHandler struct{ n *atomic.Int64 }

func (c countingHandler) HandleMessage(*session.Session, *jsonrpc.Message, uint64) { c.n.Add(1) }
func (c countingHandler) HandleBatch(*session.Session, []byte, uint64)             {}
func (c countingHandler) WaitRoom(context.Context) error                           { return nil }
func (c countingHandler) Flush()                                                   {}

func TestAccessorsAndStats(t *testing.T) {
	h := newFakeHandler()
	h.onMessage = func(s *session.Session, m *jsonrpc.Message) {
		s.Begin()
		echo(s, m)
	}
	cfg := session.Config{ID: 42, Peer: session.Peer{Transport: "unix", Addr: "pid 1"}}
	hs := start(t, connTypes[0], cfg, h, 0)
	assert.Equal(t, uint64(42), hs.sess.ID())
	assert.Equal(t, cfg.Peer, hs.sess.Peer())
	assert.NotNil(t, hs.sess.Logger())

	req := request(`1`, "a")
	hs.send(req)
	line := hs.readLine("answer")
	// The writer counts a frame after its write returns, which may be just
	// after the client has read it.
	require.Eventually(t, func() bool { return hs.sess.Stats().BytesOut == int64(len(line)) }, waitLong, time.Millisecond, "BytesOut")
	st := hs.sess.Stats()
	assert.Equal(t, session.Stats{Started: st.Started, Inflight: 1, BytesIn: int64(len(req)), BytesOut: int64(len(line)), Queued: 0}, st)
	assert.False(t, st.Started.IsZero(), "Started")

	stream := session.NewStream(hs.server, 1)
	assert.Same(t, hs.server, stream.Conn())
}
