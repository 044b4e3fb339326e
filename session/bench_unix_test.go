//go:build unix

package session_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// benchAnswer is the answer every benchmark here sends: a small result.
var benchAnswer = outbox.Frame{Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"bench"}]}}`)}

// runHandler answers each request as the hub does with the answers a
// server sends in one run: held with SendLater, written by Flush (or,
// when send is set, sent at once with Send).
type runHandler struct {
	sess *session.Session
	send bool
	held int
}

func (h *runHandler) HandleMessage(s *session.Session, m *jsonrpc.Message, _ uint64) {
	if h.send {
		s.Send(benchAnswer)
		return
	}
	s.SendLater(benchAnswer)
	h.held++
}

func (h *runHandler) HandleBatch(*session.Session, []byte, uint64) {}
func (h *runHandler) WaitRoom(context.Context) error               { return nil }

func (h *runHandler) Flush() {
	if h.held > 0 {
		h.held = 0
		h.sess.Flush()
	}
}

// benchSession runs a session over a socket pair with h; it returns the
// client end and its reader.
func benchSession(b *testing.B, h *runHandler) (client net.Conn, br *bufio.Reader) {
	b.Helper()
	server, c := socketPair(b)
	sess := session.New(session.Config{}, session.NewStream(server, 1<<20))
	h.sess = sess
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- sess.Run(ctx, h) }()
	b.Cleanup(func() {
		cancel()
		<-done
		c.Close()
	})
	return c, bufio.NewReaderSize(c, 64<<10)
}

// readLines reads n lines.
func readLines(b *testing.B, br *bufio.Reader, n int) {
	for range n {
		if _, err := br.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionRoundTrip: one request, one answer, as a client that
// waits for each answer before it sends the next request.
func BenchmarkSessionRoundTrip(b *testing.B) {
	for _, send := range []bool{true, false} {
		name := map[bool]string{true: "Send", false: "SendLater+Flush"}[send]
		b.Run(name, func(b *testing.B) {
			c, br := benchSession(b, &runHandler{send: send})
			req := []byte(request(`1`, "tools/call") + "\n")
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				readLines(b, br, 1)
			}
		})
	}
}

// BenchmarkSessionPipelined: 64 requests in one write, their 64 answers
// held and flushed as one run.
func BenchmarkSessionPipelined(b *testing.B) {
	const run = 64
	c, br := benchSession(b, &runHandler{})
	var reqs []byte
	for i := range run {
		reqs = append(append(reqs, request(fmt.Sprint(i), "tools/call")...), '\n')
	}
	for b.Loop() {
		if _, err := c.Write(reqs); err != nil {
			b.Fatal(err)
		}
		readLines(b, br, run)
	}
	b.ReportMetric(float64(run*b.N)/b.Elapsed().Seconds(), "answers/s")
}

// BenchmarkSessionAnswers: answers that come from elsewhere (the server's
// reader), one run of n at a time, while the client reads.
func BenchmarkSessionAnswers(b *testing.B) {
	for _, n := range []int{1, 16} {
		for _, send := range []bool{true, false} {
			name := fmt.Sprintf("%s/run=%d", map[bool]string{true: "Send", false: "SendLater+Flush"}[send], n)
			b.Run(name, func(b *testing.B) {
				h := &runHandler{}
				_, br := benchSession(b, h)
				for b.Loop() {
					for range n {
						var err error
						if send {
							err = h.sess.Send(benchAnswer)
						} else {
							err = h.sess.SendLater(benchAnswer)
						}
						require.NoError(b, err)
					}
					h.sess.Flush()
					readLines(b, br, n)
				}
			})
		}
	}
}
