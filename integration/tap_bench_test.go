package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkTapStalled measures what a tap that never reads costs everyone
// else. One session's echo latency is taken without a tap, then with a
// tap of the whole server (--full) that reads nothing while another
// session floods the server with 64 KiB echoes; the daemon's memory is
// read after a flood without the tap, then after one with it and after a
// second one as large; lines-lost is what the tap was told it lost. It
// reports figures and never fails on a time:
//
//	cd integration && go test -run '^$' -bench TapStalled -benchtime 1x .
func BenchmarkTapStalled(b *testing.B) {
	const calls, flood = 500, 300
	d := startDaemon(b, demo("demo", nil), `outbox_max = "256MiB"`)
	quiet, noisy := open(b, d.socket("demo")), open(b, d.socket("demo"))
	big := strings.Repeat("x", 64<<10)
	for b.Loop() {
		floodEchoes(b, noisy, "f0-", flood, big) // the same flood without a tap: warm, and the baseline
		noTap := echoLatencies(b, quiet, "a", calls)
		heap0, rss0 := daemonMemory(b, d)

		stalled := attachStalledTap(b, d)
		floodEchoes(b, noisy, "f1-", flood, big)
		heap1, rss1 := daemonMemory(b, d)
		tapped := echoLatencies(b, quiet, "b", calls)
		floodEchoes(b, noisy, "f2-", flood, big)
		heap2, rss2 := daemonMemory(b, d)
		b.ReportMetric(float64(lostLines(stalled)), "lines-lost")
		stalled.Close()

		p50, p99 := percentiles(noTap)
		b.ReportMetric(float64(p50.Microseconds()), "p50-µs-no-tap")
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs-no-tap")
		p50, p99 = percentiles(tapped)
		b.ReportMetric(float64(p50.Microseconds()), "p50-µs-stalled-tap")
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs-stalled-tap")
		b.ReportMetric(mib(heap0), "heap-MiB-before")
		b.ReportMetric(mib(heap1), "heap-MiB-flood1")
		b.ReportMetric(mib(heap2), "heap-MiB-flood2")
		b.ReportMetric(mib(rss0), "rss-MiB-before")
		b.ReportMetric(mib(rss1), "rss-MiB-flood1")
		b.ReportMetric(mib(rss2), "rss-MiB-flood2")
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// echoLatencies times n echo calls of c, one at a time.
func echoLatencies(b *testing.B, c *client, prefix string, n int) []time.Duration {
	b.Helper()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		require.NoError(b, c.echo(strconv.Quote(prefix+strconv.Itoa(i)), "bench"))
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// floodEchoes sends n echoes of text from one goroutine while it reads
// their n answers, in whatever order they come, on this one: mcpmux stops
// reading a session that does not read its answers, so writing them all
// first would stall.
func floodEchoes(b *testing.B, c *client, prefix string, n int, text string) {
	b.Helper()
	sent := make(chan error, 1)
	go func() { // waited for below
		for i := range n {
			if err := c.send(toolCall(strconv.Quote(prefix+strconv.Itoa(i)), "echo", map[string]string{"text": text})); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for answered := 0; answered < n; { // the demo server answers in any order
		m, err := c.read()
		require.NoError(b, err)
		if strings.HasPrefix(string(m.ID), strconv.Quote(prefix)[:len(prefix)+1]) {
			answered++
		}
	}
	require.NoError(b, <-sent)
}

// attachStalledTap asks the control socket for a full tap of every server
// and, once the daemon answered (it has attached the tap), never reads
// again.
func attachStalledTap(b *testing.B, d *daemon) net.Conn {
	b.Helper()
	c, err := net.DialTimeout("unix", filepath.Join(d.sockets, ".control.sock"), ioTimeout)
	require.NoError(b, err)
	c.SetDeadline(time.Now().Add(ioTimeout))
	_, err = io.WriteString(c, "GET /tap?full=1 HTTP/1.1\r\nHost: mcpmux\r\n\r\n")
	require.NoError(b, err)
	status, err := bufio.NewReaderSize(c, 64).ReadString('\n')
	require.NoError(b, err)
	require.Equal(b, "HTTP/1.1 200 OK\r\n", status)
	return c
}

// lostLines reads what the stalled tap was sent until the daemon tells it
// how many lines it lost (0 if it does not within a few seconds).
func lostLines(c net.Conn) int {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	lost := regexp.MustCompile(`"lost":([0-9]+)`)
	var tail []byte
	buf := make([]byte, 256<<10)
	for {
		n, err := c.Read(buf)
		tail = append(tail[max(0, len(tail)-64):], buf[:n]...)
		if m := lost.FindSubmatch(tail); m != nil {
			got, _ := strconv.Atoi(string(m[1]))
			return got
		}
		if err != nil {
			return 0
		}
	}
}

// daemonMemory is the daemon's live heap and resident set, from status.
func daemonMemory(b *testing.B, d *daemon) (heap, rss uint64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
	require.NoError(b, err)
	var st struct {
		Heap uint64 `json:"heap_bytes"`
		RSS  uint64 `json:"rss_bytes"`
	}
	require.NoError(b, json.Unmarshal(out, &st))
	return st.Heap, st.RSS
}
