package benchkit

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// path is one way to open a session with a backend.
type path struct {
	name string
	open func() (conn, error)
}

// paths measures every path for every backend, against one daemon that
// runs both; the Go backend's paths are also measured with many sessions.
func (r *run) paths(rep *Report, backends []backend) (err error) {
	servers := make([]serverConf, len(backends))
	for i, b := range backends {
		servers[i] = serverConf{name: b.server, argv: b.argv}
	}
	r.logf("starting mcpmux serve with %d servers...", len(servers))
	maxSessions := r.n.Sessions[len(r.n.Sessions)-1] + 64
	d, err := startDaemon(r.ctx, filepath.Join(r.dir, "a"), r.o.Mcpmux, maxSessions, servers...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	for _, b := range backends {
		if err := r.backend(rep, d, b); err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
	}
	return nil
}

// backend measures b over every path.
func (r *run) backend(rep *Report, d *daemon, b backend) (err error) {
	rl, err := startRelay(r.ctx, r.o.Relay, filepath.Join(r.dir, "r-"+b.server+".sock"), b.argv)
	if err != nil {
		return err
	}
	defer rl.stop()
	r.logf("starting supergateway in front of %s...", b.name)
	gw, err := startGateway(r.ctx, r.o.Node, r.gateway, b.argv)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, gw.stop()) }()
	https, err := r.httpPeers(b)
	defer func() {
		for _, hp := range https {
			err = errors.Join(err, hp.stop())
		}
	}()
	if err != nil {
		return err
	}

	paths := r.pathsTo(b, d, rl.path, gw.url)
	paths = append(paths, r.httpPathsTo(b, d, https)...)
	clients, err := r.openAll(b, paths)
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	if err != nil {
		return err
	}
	rows, err := r.echoRounds(b, paths, clients)
	if err != nil {
		return err
	}
	if b.huge {
		if err := r.hugeRows(b, paths, clients, rows); err != nil {
			return err
		}
	}
	for i, p := range paths {
		rows[i].Backend, rows[i].Path = b.name, p.name
		rep.Rows = append(rep.Rows, rows[i])
	}
	if b.name != BackendGo {
		return nil
	}
	return r.aggregates(rep, b, paths)
}

// pathsTo lists the ways to reach b, in the order of Paths: its own stdio,
// the relay at relaySock and the byte bridge in front of it, the daemon d's
// socket, connect and WebSocket, and supergateway at gatewayURL.
func (r *run) pathsTo(b backend, d *daemon, relaySock, gatewayURL string) []path {
	connect := []string{r.o.Mcpmux, "connect", "--config", d.config, "--no-autostart", b.server}
	return []path{
		{PathDirect, func() (conn, error) {
			p, err := spawn(b.argv, nil, nil)
			if err != nil {
				return nil, err
			}
			return procConn(p, 5*time.Second), nil
		}},
		{PathRelay, func() (conn, error) { return dialUnix(relaySock) }},
		{PathBridge, func() (conn, error) {
			p, err := spawn([]string{r.o.Bridge, relaySock}, nil, nil)
			if err != nil {
				return nil, err
			}
			return procConn(p, 10*time.Second), nil
		}},
		{PathSocket, func() (conn, error) { return dialUnix(d.socket(b.server)) }},
		{PathConnect, func() (conn, error) {
			p, err := spawn(connect, raceEnv(), nil)
			if err != nil {
				return nil, err
			}
			return procConn(p, 10*time.Second), nil
		}},
		{PathWS, func() (conn, error) { return dialWS(d.wsURL(b.server)) }},
		{PathSG, func() (conn, error) { return dialWS(gatewayURL) }},
	}
}

// openAll opens and warms one session per path, all open at once, so that
// the timed echoes and pipelined calls can go in rounds that visit every
// path in turn: a machine that is slower for a while then slows every path
// alike, and the ratios between paths hold. On error it returns the
// sessions it opened, for the caller to close.
func (r *run) openAll(b backend, paths []path) ([]*client, error) {
	clients := make([]*client, 0, len(paths))
	for _, p := range paths {
		r.logf("opening a session with %s over %s...", b.name, p.name)
		c, err := r.dial(p.open)
		if err != nil {
			return clients, fmt.Errorf("%s: %w", p.name, err)
		}
		clients = append(clients, c)
		if err := warm(c, r.n.Warm); err != nil {
			return clients, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return clients, nil
}

// echoRounds times sequential echoes and pipelined calls over every path,
// in rounds, and returns a row per path with their figures.
func (r *run) echoRounds(b backend, paths []path, clients []*client) ([]Row, error) {
	lats := make([][]time.Duration, len(paths))
	pipeTime := make([]time.Duration, len(paths))
	rows := make([]Row, len(paths))
	rounds := max(1, r.n.Rounds)
	r.logf("measuring %s: echo and pipelined calls over every path, %d rounds...", b.name, rounds)
	for range rounds {
		for i, p := range paths {
			if rows[i].Failed != "" {
				continue
			}
			d, err := r.echoRound(clients[i], &lats[i], rounds)
			if err != nil && slices.Contains(peerPaths, p.name) {
				// A peer that fails under the load (supergateway has reset
				// connections) is reported as failed; the others go on.
				r.logf("%s failed: %.200v; its figures are left out", p.name, err)
				rows[i].Failed = err.Error()
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			pipeTime[i] += d
		}
	}
	for i, lat := range lats {
		if rows[i].Failed != "" {
			continue
		}
		slices.Sort(lat)
		rows[i].P50, rows[i].P99 = lat[len(lat)/2], lat[len(lat)*99/100]
		rows[i].CallsPerSec = float64(r.n.Pipelined/rounds*rounds) / pipeTime[i].Seconds()
	}
	return rows, nil
}

// echoRound is one round of a path: its share of the sequential echoes,
// each timed into lat, then of the pipelined calls, timed as a whole.
func (r *run) echoRound(c *client, lat *[]time.Duration, rounds int) (time.Duration, error) {
	for range r.n.Echo / rounds {
		t0 := time.Now()
		if err := c.echo(); err != nil {
			return 0, fmt.Errorf("echo: %w", err)
		}
		*lat = append(*lat, time.Since(t0))
	}
	d, err := pipelined(c, r.n.Pipelined/rounds, r.n.InFlight)
	if err != nil {
		return 0, fmt.Errorf("pipelined: %w", err)
	}
	return d, nil
}

// hugeRows adds the large results' figures to each path's row, with fewer
// repetitions through supergateway, which is slow with them.
func (r *run) hugeRows(b backend, paths []path, clients []*client, rows []Row) error {
	for i, p := range paths {
		if rows[i].Failed != "" {
			continue
		}
		r.logf("measuring %s over %s: large results...", b.name, p.name)
		hugeReps := [2]int{r.n.Huge1, r.n.Huge10}
		if slices.Contains(peerPaths, p.name) {
			hugeReps = [2]int{min(r.n.Huge1, r.n.GatewayHugeReps), min(r.n.Huge10, r.n.GatewayHugeReps)}
		}
		if err := r.huge(clients[i], &rows[i], hugeReps); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		reps := r.n.MsgReps
		if slices.Contains(peerPaths, p.name) {
			reps = max(1, reps/10)
		}
		for _, size := range r.n.MsgSizes {
			d, err := sizedEchoes(clients[i], size, reps)
			if err != nil && slices.Contains(peerPaths, p.name) {
				// A peer that refuses a message this large (supergateway's
				// body limit) is reported as such, not measured.
				r.logf("%s refused %d-byte echoes: %.120v", p.name, size, err)
				rows[i].Sizes = append(rows[i].Sizes, 0)
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %d-byte echoes: %w", p.name, size, err)
			}
			rows[i].Sizes = append(rows[i].Sizes, d)
		}
	}
	return nil
}

// aggregates measures the aggregate throughput of b over each of
// AggregatePaths with every count of sessions (the relay, one server per
// session, only up to RelayMax; supergateway up to PeerMax).
func (r *run) aggregates(rep *Report, b backend, paths []path) error {
	for _, p := range paths {
		if !slices.Contains(AggregatePaths(), p.name) {
			continue
		}
		for _, n := range r.n.Sessions {
			if (p.name == PathRelay && n > r.n.RelayMax) || (p.name == PathSG && n > r.n.PeerMax) {
				continue
			}
			r.logf("measuring %s over %s with %d sessions...", b.name, p.name, n)
			cps, err := r.aggregate(p.open, n)
			if err != nil {
				return fmt.Errorf("%s, %d sessions: %w", p.name, n, err)
			}
			rep.Aggregate = append(rep.Aggregate, AggRow{Path: p.name, Sessions: n, CallsPerSec: cps})
		}
	}
	return nil
}

// warm initializes a session and makes n echo calls, untimed: node's JIT
// and every buffer on the way are ready before anything is measured.
func warm(c *client, n int) error {
	if err := c.initialize(); err != nil {
		return err
	}
	for range n {
		if err := c.echo(); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// huge measures the large results on one session.
func (r *run) huge(c *client, row *Row, hugeReps [2]int) error {
	row.Huge = true
	if hugeReps[1] > 1 { // one untimed, which sizes the buffers on the way
		if _, _, err := hugeResults(c, r.n.HugeSizes[1], 1); err != nil {
			return fmt.Errorf("huge %d: %w", r.n.HugeSizes[1], err)
		}
	}
	var err error
	if row.Huge1, row.MBps1, err = hugeResults(c, r.n.HugeSizes[0], hugeReps[0]); err != nil {
		return fmt.Errorf("huge %d: %w", r.n.HugeSizes[0], err)
	}
	if row.Huge10, row.MBps10, err = hugeResults(c, r.n.HugeSizes[1], hugeReps[1]); err != nil {
		return fmt.Errorf("huge %d: %w", r.n.HugeSizes[1], err)
	}
	return nil
}

// pipelined sends total echo calls keeping inFlight outstanding and returns
// the time to the last answer. On an error it closes c, so that its reader
// returns.
func pipelined(c *client, total, inFlight int) (time.Duration, error) {
	slots := make(chan struct{}, inFlight)
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { // waited for through done
		for range total {
			if err := checkEcho(recvAnswer(c)); err != nil {
				done <- err
				return
			}
			<-slots
		}
		done <- nil
	}()
	for range total {
		var err error
		select {
		case slots <- struct{}{}:
			err = c.send(c.echoCall())
		case err = <-done:
			err = errors.Join(err, errors.New("answers ended early"))
			c.Close()
			return 0, err
		}
		if err != nil {
			c.Close()
			return 0, errors.Join(err, <-done)
		}
	}
	if err := <-done; err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// hugeResults asks reps times, one at a time, for a result of size bytes
// and returns the median time per result and the MB/s of answer bytes.
func hugeResults(c *client, size, reps int) (time.Duration, float64, error) {
	params := fmt.Sprintf(`{"name":"huge","arguments":{"bytes":%d}}`, size)
	var bytesIn int
	times := make([]time.Duration, reps)
	t0 := time.Now()
	for i := range reps {
		t := time.Now()
		line, err := c.call("tools/call", params)
		if err != nil {
			return 0, 0, err
		}
		times[i] = time.Since(t)
		if len(line) < size {
			return 0, 0, fmt.Errorf("answer of %d bytes for a %d-byte result: %.200s", len(line), size, line)
		}
		bytesIn += len(line)
	}
	slices.Sort(times)
	return times[reps/2], float64(bytesIn) / 1e6 / time.Since(t0).Seconds(), nil
}

// aggregate opens sessions initialized sessions, then has each make echo
// calls one after the other for AggFor, all at once, and returns the calls
// per second they made together.
func (r *run) aggregate(open func() (conn, error), sessions int) (cps float64, err error) {
	clients, err := r.openSessions(open, sessions)
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	if err != nil {
		return 0, err
	}
	start := make(chan struct{})
	calls := make([]int, sessions)
	errs := make([]error, sessions)
	var deadline time.Time
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			<-start
			for time.Now().Before(deadline) {
				if err := c.echo(); err != nil {
					errs[i] = err
					return
				}
				calls[i]++
			}
		})
	}
	t0 := time.Now()
	deadline = t0.Add(r.n.AggFor)
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	total := 0
	for _, n := range calls {
		total += n
	}
	return float64(total) / elapsed.Seconds(), nil
}

// openers is how many sessions openSessions opens at once.
const openers = 8

// openSessions opens n sessions, openers at a time, each initialized and
// with one echo call answered. One at a time, ten thousand HTTP sessions
// take longer on a slow machine than a client keeps a connection idle (30
// s): the first ones would all dial again at once when the timed calls
// start, a burst the web listener meets by closing the newest arrivals'
// oldest (see socket's limitListener), which is not what is measured. It
// returns every client it opened, for the caller to close, even with an
// error.
func (r *run) openSessions(open func() (conn, error), n int) ([]*client, error) {
	clients := make([]*client, n)
	errs := make([]error, openers)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := range openers {
		wg.Go(func() {
			for i := range next {
				if failed.Load() {
					return
				}
				c, err := r.dial(open)
				if err == nil {
					clients[i] = c
					err = errors.Join(c.initialize(), c.echo())
				}
				if err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(clients, func(c *client) bool { return c == nil }), errors.Join(errs...)
}

// httpPeers starts the Streamable HTTP fronts to b that are not mcpmux:
// the floor, supergateway and mcp-proxy, in the order of Paths. On error it
// returns those it started, for the caller to stop.
func (r *run) httpPeers(b backend) ([]*httpPeer, error) {
	var peers []*httpPeer
	for _, start := range []func() (*httpPeer, error){
		func() (*httpPeer, error) { return startHTTPRelay(r.ctx, r.o.HTTPRelay, b.argv) },
		func() (*httpPeer, error) { return startGatewayHTTP(r.ctx, r.o.Node, r.gateway, b.argv) },
		func() (*httpPeer, error) { return startMcpProxy(r.ctx, r.o.Node, r.mcpProxy, b.argv) },
	} {
		hp, err := start()
		if err != nil {
			return peers, err
		}
		r.logf("started %s in front of %s", hp.name, b.name)
		peers = append(peers, hp)
	}
	return peers, nil
}

// httpPathsTo lists the Streamable HTTP ways to reach b, in the order of
// Paths: the floor, the daemon d's endpoint, supergateway, mcp-proxy.
func (r *run) httpPathsTo(b backend, d *daemon, peers []*httpPeer) []path {
	at := func(url, token string) func() (conn, error) {
		return func() (conn, error) { return dialHTTP(url, token) }
	}
	return []path{
		{PathHTTPRelay, at(peers[0].url, "")},
		{PathHTTP, at(d.httpURL(b.server), token)},
		{PathSGHTTP, at(peers[1].url, "")},
		{PathProxyHTTP, at(peers[2].url, "")},
	}
}

// sizedEchoes makes reps echo calls, one at a time, whose message (and so
// answer) is size bytes, and returns their median round trip.
func sizedEchoes(c *client, size, reps int) (time.Duration, error) {
	msg := strings.Repeat("x", size)
	times := make([]time.Duration, reps)
	for i := range reps {
		t := time.Now()
		line, err := c.call("tools/call", `{"name":"echo","arguments":{"message":"`+msg+`"}}`)
		if err != nil {
			return 0, err
		}
		times[i] = time.Since(t)
		if len(line) < size {
			return 0, fmt.Errorf("an answer of %d bytes to a %d-byte message", len(line), size)
		}
	}
	slices.Sort(times)
	return times[reps/2], nil
}
