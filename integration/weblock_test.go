package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// trickleEnv names the variable that makes this test binary a trickler:
// it holds the web listener's address to trickle headers to.
const trickleEnv = "MCPMUX_TEST_TRICKLE"

// trickleCount is how many connections the trickler keeps, or tries to.
const trickleCount = 2400

// trickleStats is what the trickler reports on its stdout when it ends.
type trickleStats struct {
	UID     int   `json:"uid"`
	Dials   int64 `json:"dials"`   // connections opened
	Closed  int64 `json:"closed"`  // of them, closed by the daemon
	MaxOpen int64 `json:"maxOpen"` // open at once, at most
}

// trickle keeps trickleCount connections to addr, each sending a request's
// headers one line every 200 ms and never ending them, and opens another
// 100 ms after the daemon closes one; until its stdin closes. It prints
// "ready" once it has opened trickleCount, and trickleStats when it ends.
func trickle(addr string) int {
	stop := make(chan struct{})
	go func() { // ends with the process
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	var dials, closed, open, maxOpen atomic.Int64
	var wg sync.WaitGroup
	for range trickleCount {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					continue
				}
				if dials.Add(1) == trickleCount {
					fmt.Println("ready") // every one of them has been opened once
				}
				n := open.Add(1)
				for m := maxOpen.Load(); n > m && !maxOpen.CompareAndSwap(m, n); m = maxOpen.Load() {
				}
				gone := make(chan struct{})
				go func() { // until the daemon closes it
					io.Copy(io.Discard, c)
					close(gone)
				}()
				_, err = c.Write([]byte("POST /servers/demo HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
				tick := time.NewTicker(200 * time.Millisecond)
			hold:
				for i := 0; err == nil; i++ {
					select {
					case <-stop:
						break hold
					case <-gone:
						closed.Add(1)
						break hold
					case <-tick.C:
						_, err = fmt.Fprintf(c, "X-Trickle-%d: x\r\n", i)
					}
				}
				tick.Stop()
				if err != nil {
					closed.Add(1) // reset by the daemon
				}
				c.Close()
				<-gone
				open.Add(-1)
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	json.NewEncoder(os.Stdout).Encode(trickleStats{UID: os.Getuid(), Dials: dials.Load(), Closed: closed.Load(), MaxOpen: maxOpen.Load()})
	return 0
}

// startTrickler runs this test binary as a trickler against addr: as user
// nobody when the tests run as root, else as the tests' own user. Its stop
// ends it and returns what it reports.
func startTrickler(t *testing.T, addr string) (stop func() trickleStats) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	if os.Getuid() == 0 {
		// A copy another user can run: the test binary's own folder is
		// private.
		dir, err := os.MkdirTemp("", "mxtrickle")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		require.NoError(t, os.Chmod(dir, 0o755))
		copyFile(t, self, filepath.Join(dir, "trickle"))
		cmd = exec.Command(filepath.Join(dir, "trickle"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		cmd.Dir = dir
	} else {
		t.Log("not root: the trickler runs as this user")
	}
	cmd.Env = []string{trickleEnv + "=" + addr, "PATH=/usr/bin:/bin"}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 2)
	go func() { // ends when the trickler does
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var once sync.Once
	var stats trickleStats
	stop = func() trickleStats {
		once.Do(func() {
			stdin.Close()
			var report string
			for l := range lines {
				report = l
			}
			assert.NoError(t, cmd.Wait(), "the trickler")
			assert.NoError(t, json.Unmarshal([]byte(report), &stats), "the trickler's report %q", report)
		})
		return stats
	}
	t.Cleanup(func() { stop() })
	select {
	case l := <-lines:
		require.Equal(t, "ready", l)
	case <-time.After(2 * time.Minute):
		stop()
		t.Fatal("the trickler did not open its connections in 2 minutes")
	}
	return stop
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// openFDs counts the descriptors process pid has open.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	require.NoError(t, err)
	return len(entries)
}

// TestWebListenerUnlockedByTricklers: 2,400 connections that trickle their
// headers, from another user without the token, do not lock a token
// holder out. Its web client, which keeps its connection, has each of its
// 20 requests answered within a second; 20 more, each on a new connection
// (which waits its turn among the flood's to be accepted), are each
// answered too. The daemon's descriptors stay bounded.
func TestWebListenerUnlockedByTricklers(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("counts the daemon's descriptors in /proc")
	}
	d := startDaemon(t, demo("demo", nil), wsListen)
	fresh := newHTTPClient(t, d, "demo") // a new connection per request
	sid := fresh.initialize(t)
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	kept := &httpClient{url: fresh.url, hc: &http.Client{Transport: tr}}
	baseFDs := openFDs(t, d.cmd.Process.Pid)

	stop := startTrickler(t, d.webAddr()) // returns once it opened all of them
	var keptLat, freshLat []time.Duration
	maxFDs := 0
	pace := time.NewTicker(100 * time.Millisecond) // spread over four seconds of the flood
	defer pace.Stop()
	for i := range 40 {
		<-pace.C
		c, lat := kept, &keptLat
		if i%2 == 1 {
			c, lat = fresh, &freshLat
		}
		start := time.Now()
		evs := c.call(t, sid, toolCall(strconv.Itoa(i+1), "echo", map[string]string{"text": "through"}))
		*lat = append(*lat, time.Since(start))
		last := evs[len(evs)-1].msg
		require.Equal(t, jsonrpc.KindResult, last.Kind, "%s", last.Frame)
		maxFDs = max(maxFDs, openFDs(t, d.cmd.Process.Pid))
	}
	stats := stop()
	keptMed, keptSlow := spread(keptLat)
	freshMed, freshSlow := spread(freshLat)
	t.Logf("%d header-trickling connections from uid %d (%d opened, %d closed by the daemon, %d open at once at most): "+
		"20 requests on a kept connection answered in median %v, slowest %v; 20 on new connections in median %v, slowest %v; "+
		"daemon descriptors %d before, %d at most during",
		trickleCount, stats.UID, stats.Dials, stats.Closed, stats.MaxOpen,
		keptMed, keptSlow, freshMed, freshSlow, baseFDs, maxFDs)
	for i, l := range keptLat {
		assert.Less(t, l, time.Second, "request %d", i+1)
	}
	assert.Less(t, maxFDs, baseFDs+200, "the daemon's descriptors stay bounded")
	assert.Greater(t, stats.Closed, int64(trickleCount), "the daemon closed the trickling connections")
}

// TestWebSlowBodiesClosed: 20 POSTs that send their headers and then a
// body a byte every 500 ms, with the token and without, are each closed
// by the daemon once the body deadline (10 s) passes.
func TestWebSlowBodiesClosed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), wsListen)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []time.Duration
	for i := range 20 {
		auth := ""
		if i%2 == 0 {
			auth = "Authorization: Bearer " + wsToken + "\r\n"
		}
		wg.Go(func() {
			c, err := net.Dial("tcp", d.webAddr())
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprintf(c, "POST /servers/demo HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{", auth)
			gone := make(chan struct{})
			go func() { // until the daemon closes it
				io.Copy(io.Discard, bufio.NewReader(c))
				close(gone)
			}()
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-gone:
					mu.Lock()
					held = append(held, time.Since(start))
					mu.Unlock()
					return
				case <-tick.C:
					if time.Since(start) > 30*time.Second {
						c.Close()
						<-gone
						t.Error("a slow body kept its connection for 30 s")
						return
					}
					c.Write([]byte(" "))
				}
			}
		})
	}
	wg.Wait()
	sort.Slice(held, func(i, j int) bool { return held[i] < held[j] })
	require.Len(t, held, 20)
	t.Logf("20 slow bodies: closed after %v to %v", held[0].Round(time.Millisecond), held[19].Round(time.Millisecond))
}

// holdListens opens n subscriptions/listen POSTs on c, from clients named
// by name(i), 32 at a time, each on its own connection; a listen that was
// taken is read until it ends, in the background, and counted in ended
// then. It returns the statuses of the n POSTs.
func holdListens(t *testing.T, c *httpClient, n int, name func(int) string, ended *atomic.Int64, wg *sync.WaitGroup) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	next := make(chan int)
	var workers sync.WaitGroup
	for range 32 {
		workers.Go(func() {
			for i := range next {
				body := string(request(fmt.Sprintf(`"L%d"`, i), "subscriptions/listen", map[string]any{
					"notifications": map[string]any{"toolsListChanged": true},
					"_meta": map[string]any{
						"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
						"io.modelcontextprotocol/clientInfo":         map[string]any{"name": name(i), "version": "1"},
						"io.modelcontextprotocol/clientCapabilities": map[string]any{},
					},
				}))
				req, err := http.NewRequestWithContext(t.Context(), "POST", c.url, strings.NewReader(body))
				if !assert.NoError(t, err) {
					continue
				}
				req.Header.Set("Authorization", "Bearer "+wsToken)
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "subscriptions/listen")
				code := 0
				resp, err := c.hc.Do(req)
				if err == nil {
					code = resp.StatusCode
					if code == http.StatusOK {
						// The acknowledgement, then nothing until it ends.
						br := bufio.NewReader(resp.Body)
						_, err := br.ReadString('\n')
						assert.NoError(t, err, "listen %d's first event", i)
						wg.Go(func() {
							io.Copy(io.Discard, br)
							resp.Body.Close()
							ended.Add(1)
						})
					} else {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
				mu.Lock()
				statuses[code]++
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	workers.Wait()
	return statuses
}

// timeRequests sends 20 requests of another client, modern tool calls and
// calls on a 2025 session in turn, each on a new connection, and returns
// how long each took to be answered.
func timeRequests(t *testing.T, c *httpClient, sid string) []time.Duration {
	t.Helper()
	var lat []time.Duration
	for i := range 20 {
		start := time.Now()
		if i%2 == 0 {
			resp := c.modernPOST(t, t.Context(), strconv.Itoa(i+1), "tools/call", map[string]any{"name": "echo", "arguments": map[string]string{"text": "room"}})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			_, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
		} else {
			evs := c.call(t, sid, toolCall(strconv.Itoa(i+1), "echo", map[string]string{"text": "room"}))
			require.Equal(t, jsonrpc.KindResult, evs[len(evs)-1].msg.Kind, "%s", evs[len(evs)-1].msg.Frame)
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

// spread is the median and the slowest of lat.
func spread(lat []time.Duration) (median, slowest time.Duration) {
	sorted := append([]time.Duration(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond)
}

// TestWebListensLeaveRoom: 1,100 listens leave room for other clients.
// From one client, its newest 16 (http_max_listens) are held and the older
// ones ended; from 1,100 clients, 768 (http_max_streams, three quarters of
// http_max_connections) are held and the rest refused 503. Meanwhile
// another client's 20 requests are each answered within a second.
func TestWebListensLeaveRoom(t *testing.T) {
	d := startDaemon(t, demo("demo", nil), wsListen)
	c := newHTTPClient(t, d, "demo")
	sid := c.initialize(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.hc.Transport.(*http.Transport).CloseIdleConnections()

	var ended atomic.Int64
	statuses := holdListens(t, c, 1100, func(int) string { return "leaky" }, &ended, &wg)
	// A listen ended before its acknowledgement went out is answered 503.
	assert.Equal(t, 1100, statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable], "one client's listens are each taken, the oldest ended: %v", statuses)
	lat := timeRequests(t, c, sid)
	med, slow := spread(lat)
	t.Logf("1,100 listens of one client (%v; %d ended for newer ones after they started): 20 requests of another answered in median %v, slowest %v",
		statuses, ended.Load(), med, slow)
	for i, l := range lat {
		assert.Less(t, l, time.Second, "request %d", i+1)
	}
	assert.Eventually(t, func() bool { return ended.Load() == int64(statuses[http.StatusOK]-16) }, 30*time.Second, 10*time.Millisecond,
		"all but the client's newest 16 listens ended")
	assert.Contains(t, d.log(), "ended a listen")

	statuses = holdListens(t, c, 1100, func(i int) string { return fmt.Sprintf("client-%d", i) }, &ended, &wg)
	lat = timeRequests(t, c, sid)
	med, slow = spread(lat)
	t.Logf("1,100 listens of 1,100 clients (%v): 20 requests of another answered in median %v, slowest %v", statuses, med, slow)
	for i, l := range lat {
		assert.Less(t, l, time.Second, "request %d", i+1)
	}
	assert.Equal(t, 768-16, statuses[http.StatusOK], "the listens held, with the first client's 16, are http_max_streams")
	assert.Equal(t, 1100-(768-16), statuses[http.StatusServiceUnavailable], "the rest are refused")
	d.stop() // ends the listens held
}
