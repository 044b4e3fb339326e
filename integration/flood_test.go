package integration

import (
	"bufio"
	"errors"
	"fmt"
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
)

// residentBytes reads a process's resident set size from /proc.
func residentBytes(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS line")
}

// rssWatch samples a process's resident set every few milliseconds and
// keeps the largest.
type rssWatch struct {
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func watchRSS(pid int) *rssWatch {
	w := &rssWatch{stop: make(chan struct{})}
	w.wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := residentBytes(pid); err == nil && n > w.peak.Load() {
				w.peak.Store(n)
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	})
	return w
}

// end stops the sampling and returns the peak.
func (w *rssWatch) end() int64 {
	close(w.stop)
	w.wg.Wait()
	return w.peak.Load()
}

// yamuxPings is n yamux SYN pings (the frame header of the yamux spec:
// version 0, type 2, flag SYN, stream 0, the ping's id as its length).
func yamuxPings(n int) []byte {
	b := make([]byte, 0, 12*n)
	for i := range n {
		b = append(b, 0, 2, 0, 1, 0, 0, 0, 0, byte(i>>24), byte(i>>16), byte(i>>8), byte(i))
	}
	return b
}

// pingFlood writes pings on fresh connections to path, never reading an
// answer, until total pings have been taken by the daemon's end of the
// connections; it returns how many connections that took.
func pingFlood(path string, total int) (conns int, err error) {
	const perConn = 50000
	flood := yamuxPings(perConn)
	for sent := 0; sent < total; conns++ {
		c, err := net.DialTimeout("unix", path, ioTimeout)
		if err != nil {
			return conns, err
		}
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		n, _ := c.Write(flood) // ends when the daemon closes the connection
		c.Close()
		sent += n / 12
		if n == 0 {
			return conns, errors.New("a flooding connection took no byte")
		}
	}
	return conns, nil
}

// TestYamuxPingFloodLeavesMemoryFlat: 200,000 yamux pings that are never
// read (the yamux library answers each from a goroutine that waits up to
// 10 s to send) leave the daemon under 200 MiB: a connection that floods
// control frames is closed. A session on another connection is answered
// throughout, and the flood costs the log a few lines, not one per ping.
func TestYamuxPingFloodLeavesMemoryFlat(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the daemon's memory from /proc")
	}
	d := startDaemon(t, demo("demo", nil), "")
	bystander := open(t, d.socket("demo"))
	watch := watchRSS(d.cmd.Process.Pid)

	flooded := make(chan error, 1)
	var conns int
	go func() {
		var err error
		conns, err = pingFlood(d.socket("demo"), 200_000)
		flooded <- err
	}()
	answered, slowest := 0, time.Duration(0)
	for done := false; !done; {
		select {
		case err := <-flooded:
			require.NoError(t, err, "the flood")
			done = true
		default:
		}
		start := time.Now()
		bystander.conn.SetDeadline(time.Now().Add(5 * time.Second))
		require.NoError(t, bystander.echo(strconv.Quote(fmt.Sprint("b", answered)), fmt.Sprint("during the flood ", answered)),
			"the bystander's call %d", answered)
		answered++
		slowest = max(slowest, time.Since(start))
	}
	peak := watch.end()
	t.Logf("200,000 pings over %d connections; the bystander answered %d times, the slowest in %v; daemon peak RSS %.1f MiB",
		conns, answered, slowest.Round(time.Millisecond), float64(peak)/(1<<20))
	assert.Less(t, peak, int64(200<<20), "the daemon's peak resident set")
	assert.Positive(t, answered, "calls answered during the flood")

	var warnings []string
	for _, l := range strings.Split(d.log(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "yamux") {
			warnings = append(warnings, l)
		}
	}
	assert.Contains(t, d.log(), "flooded control frames", "the closing is logged")
	assert.LessOrEqual(t, len(warnings), 10, "warnings for the flood of %d connections:\n%s", conns, strings.Join(warnings, "\n"))
}
