//go:build unix

package upstream_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// counter is a Handler that signals each message it gets.
type counter struct{ got chan struct{} }

func (c counter) HandleMessage(*jsonrpc.Message)                  { c.got <- struct{}{} }
func (c counter) HandleTooLarge(json.RawMessage, int64)           {}
func (c counter) HandleInvalidAnswer(json.RawMessage, error) bool { return false }
func (c counter) Flush()                                          {}

// benchCat runs cat(1) as the server, so every frame sent comes back.
func benchCat(b *testing.B) (*upstream.Process, counter) {
	b.Helper()
	cat, err := exec.LookPath("cat")
	if err != nil {
		b.Skip("no cat:", err)
	}
	h := counter{got: make(chan struct{}, 1024)}
	p, err := upstream.Start(upstream.Config{Name: "cat", Command: cat}, h)
	require.NoError(b, err)
	b.Cleanup(func() {
		p.Kill("benchmark over")
		<-p.Done()
	})
	return p, h
}

// BenchmarkProcessRoundTrip: one frame to the server and back, sent at
// once (Send: the writer goroutine writes it) or held and flushed (the
// caller writes it).
func BenchmarkProcessRoundTrip(b *testing.B) {
	for _, send := range []bool{true, false} {
		name := map[bool]string{true: "Send", false: "SendLater+Flush"}[send]
		b.Run(name, func(b *testing.B) {
			p, h := benchCat(b)
			frame := request(1, "tools/call")
			for b.Loop() {
				if send {
					require.NoError(b, p.Send(frame))
				} else {
					require.NoError(b, p.SendLater(frame))
					p.Flush()
				}
				<-h.got
			}
		})
	}
}

// BenchmarkProcessRun: a run of frames held and flushed together, as the
// sessions' readers send the requests that arrived together.
func BenchmarkProcessRun(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("run=%d", n), func(b *testing.B) {
			p, h := benchCat(b)
			frame := request(1, "tools/call")
			for b.Loop() {
				for range n {
					require.NoError(b, p.SendLater(frame))
				}
				p.Flush()
				for range n {
					<-h.got
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
