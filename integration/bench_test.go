package integration

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// The benchmarks report figures; they never fail on a time. Run them with
//
//	cd integration && go test -run '^$' -bench . -benchtime 2000x .

// BenchmarkEchoP99WithSlowReader measures echo latency through mcpmux while
// another session of the same server is fed 100 MB by a reader that takes
// its answers at a bounded pace (about 50 MB/s), so that the daemon keeps
// that session throttled rather than evicting it.
func BenchmarkEchoP99WithSlowReader(b *testing.B) {
	const count, size = 40, 2_500_000
	d := startDaemon(b, demo("demo", nil), `outbox_max = "256MiB"`)
	slow, fast := open(b, d.socket("demo")), open(b, d.socket("demo"))

	fed := make(chan int64, 1)
	require.NoError(b, slow.send(hugeRequests(count, size)...))
	go func() { fed <- paceReader(slow.conn, count) }() // ends when all answers are in or slow is closed

	lat := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if err := fast.echo(strconv.Itoa(i), "bench"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		i++
	}
	b.StopTimer()
	slow.close()
	n := <-fed

	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(n)/1e6, "MB-fed")
}

// paceReader reads c at about 64 KiB per millisecond until it has seen want
// newlines (answers) or the connection ends, and returns the bytes read.
func paceReader(c net.Conn, want int) int64 {
	buf := make([]byte, 64<<10)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var total int64
	lines := 0
	for lines < want {
		<-tick.C
		c.SetReadDeadline(time.Now().Add(ioTimeout))
		n, err := c.Read(buf)
		total += int64(n)
		for _, ch := range buf[:n] {
			if ch == '\n' {
				lines++
			}
		}
		if err != nil {
			break
		}
	}
	return total
}

// BenchmarkEchoDirectVsMux compares, in the same run, echo calls to the demo
// server over its own stdio with echo calls to it through mcpmux's socket:
// mean latency and calls per second of each, and the ratio.
func BenchmarkEchoDirectVsMux(b *testing.B) {
	d := startDaemon(b, demo("demo", nil), "")
	viaMux := open(b, d.socket("demo"))
	direct := startDirect(b)
	_, err := direct.initialize("2025-06-18")
	require.NoError(b, err)

	var muxTime, directTime time.Duration
	muxLat := make([]time.Duration, 0, 1024)
	directLat := make([]time.Duration, 0, 1024)
	i := 0
	for b.Loop() {
		id := strconv.Itoa(i)
		i++
		t0 := time.Now()
		if err := viaMux.echo(id, "bench"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := direct.echo(id, "bench"); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		muxLat, directLat = append(muxLat, t1.Sub(t0)), append(directLat, t2.Sub(t1))
		muxTime += t1.Sub(t0)
		directTime += t2.Sub(t1)
	}
	n := float64(len(muxLat))
	muxP50, muxP99 := percentiles(muxLat)
	directP50, directP99 := percentiles(directLat)
	b.ReportMetric(float64(muxTime.Microseconds())/n, "mux-µs/call")
	b.ReportMetric(float64(directTime.Microseconds())/n, "direct-µs/call")
	b.ReportMetric(n/muxTime.Seconds(), "mux-calls/s")
	b.ReportMetric(n/directTime.Seconds(), "direct-calls/s")
	b.ReportMetric(float64(muxP50.Microseconds()), "mux-p50-µs")
	b.ReportMetric(float64(muxP99.Microseconds()), "mux-p99-µs")
	b.ReportMetric(float64(directP50.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(directP99.Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(muxTime)/float64(directTime), "mux/direct")
}

// startDirect runs the demo server with its stdio on pipes and returns a
// client talking to it there; at cleanup its stdin is closed and it is
// waited for.
func startDirect(tb testing.TB) *client {
	tb.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(tb, err)
	outR, outW, err := os.Pipe()
	require.NoError(tb, err)
	cmd := exec.Command(bins.demoserver)
	cmd.Stdin, cmd.Stdout = inR, outW
	require.NoError(tb, cmd.Start())
	inR.Close()
	outW.Close()
	conn := &pipeConn{r: outR, w: inW}
	tb.Cleanup(func() {
		inW.Close() // EOF: the demo server exits 0
		require.NoError(tb, cmd.Wait())
		outR.Close()
	})
	return &client{conn: conn, r: jsonrpc.NewReader(conn, readLimit)}
}

// pipeConn is a net.Conn over a pair of pipes, so that the socket client
// can talk to a server's stdio; pipes take deadlines like sockets do.
type pipeConn struct {
	r *os.File // the server's stdout
	w *os.File // the server's stdin
}

func (p *pipeConn) Read(b []byte) (int, error)         { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error)        { return p.w.Write(b) }
func (p *pipeConn) Close() error                       { p.w.Close(); return p.r.Close() }
func (p *pipeConn) LocalAddr() net.Addr                { return pipeAddr{} }
func (p *pipeConn) RemoteAddr() net.Addr               { return pipeAddr{} }
func (p *pipeConn) SetDeadline(t time.Time) error      { p.r.SetDeadline(t); return p.w.SetDeadline(t) }
func (p *pipeConn) SetReadDeadline(t time.Time) error  { return p.r.SetReadDeadline(t) }
func (p *pipeConn) SetWriteDeadline(t time.Time) error { return p.w.SetWriteDeadline(t) }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "stdio" }
