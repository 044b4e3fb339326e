package benchkit

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// idle measures a fresh daemon running b: its memory with no session, then
// with Idle sessions on its socket that each did initialize and nothing
// since.
func (r *run) idle(b backend) (idle Idle, err error) {
	idle.Sessions = r.n.Idle
	r.logf("measuring the daemon's memory with %d idle sessions...", r.n.Idle)
	d, err := startDaemon(r.ctx, filepath.Join(r.dir, "i"), r.o.Mcpmux, r.n.Idle+64, serverConf{name: b.server, argv: b.argv})
	if err != nil {
		return idle, err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	if idle.OpenFiles, err = openFileLimit(d.pid()); err != nil {
		return idle, err
	}
	if idle.OpenFiles < r.n.Idle+64 {
		return idle, fmt.Errorf("mcpmux serve may open %d files: too few for %d sessions (raise ulimit -Hn)", idle.OpenFiles, r.n.Idle)
	}
	if idle.Base, err = memOf(d.pid()); err != nil {
		return idle, err
	}
	clients := make([]*client, 0, r.n.Idle)
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	for range r.n.Idle {
		c, err := r.dial(func() (conn, error) { return dialUnix(d.socket(b.server)) })
		if err != nil {
			return idle, err
		}
		clients = append(clients, c)
		if err := c.initialize(); err != nil {
			return idle, err
		}
	}
	// The daemon has answered every initialize; a ping on each session
	// makes sure it has also read every initialized notification.
	for _, c := range clients {
		if _, err := c.call("ping", "{}"); err != nil {
			return idle, fmt.Errorf("ping: %w", err)
		}
	}
	idle.With, err = memOf(d.pid())
	return idle, err
}

// readyAndShared measures b (server-everything) started once per client
// against one run by mcpmux for every client: the time a client waits for
// initialize and tools/list, and the memory.
func (r *run) readyAndShared(b backend) (ready Ready, shared Shared, err error) {
	ready.Nth, shared.Copies = r.n.Nth, r.n.Copies
	if ready.Cold, shared.Each, err = r.copies(b); err != nil {
		return ready, shared, err
	}
	err = r.shared(b, &ready, &shared)
	return ready, shared, err
}

// copies starts b once per client: Copies cold starts, one after the
// other, each kept running until the last has answered. It returns the
// median time from spawn to the answer of tools/list and, where memory can
// be measured, the memory of all the copies' process trees.
func (r *run) copies(b backend) (cold time.Duration, each Memory, err error) {
	r.logf("starting %d copies of %s, one after the other...", r.n.Copies, b.name)
	clients := make([]*client, 0, r.n.Copies)
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	pids := make([]int, 0, r.n.Copies)
	times := make([]time.Duration, 0, r.n.Copies)
	for range r.n.Copies {
		t0 := time.Now()
		c, pid, err := r.spawnClient(b)
		if err != nil {
			return 0, each, err
		}
		clients = append(clients, c)
		if err := errors.Join(c.initialize(), c.listTools()); err != nil {
			return 0, each, fmt.Errorf("copy %d: %w", len(clients), err)
		}
		times = append(times, time.Since(t0))
		pids = append(pids, pid)
	}
	if canMeasureMemory {
		each, err = treesMem(pids)
	}
	return median(times), each, err
}

// spawnClient starts b as a child of ours and opens a session on its
// stdio; it returns the child's pid too.
func (r *run) spawnClient(b backend) (*client, int, error) {
	var pid int
	c, err := r.dial(func() (conn, error) {
		p, err := spawn(b.argv, nil, nil)
		if err != nil {
			return nil, err
		}
		pid = p.pid()
		return procConn(p, 5*time.Second), nil
	})
	return c, pid, err
}

// treesMem is the memory of every process tree rooted at one of pids.
func treesMem(pids []int) (Memory, error) {
	var sum Memory
	for _, pid := range pids {
		kids, err := descendants(pid)
		if err != nil {
			return sum, err
		}
		m, err := sumMem(append(kids, pid))
		if err != nil {
			return sum, err
		}
		sum = sum.plus(m)
	}
	return sum, nil
}

// shared measures b run once by mcpmux for every client: how long the Nth
// client waits, over the socket and through mcpmux connect, and, where
// memory can be measured, what the daemon, the server and the bridges use
// with Copies clients through mcpmux connect.
func (r *run) shared(b backend, ready *Ready, shared *Shared) (err error) {
	r.logf("measuring the %dth client of a running %s...", r.n.Nth, b.name)
	d, err := startDaemon(r.ctx, filepath.Join(r.dir, "b"), r.o.Mcpmux, 64, serverConf{name: b.server, argv: b.argv})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	socket := func() (conn, error) { return dialUnix(d.socket(b.server)) }
	bridges := &bridgeDialer{mcpmux: r.o.Mcpmux, config: d.config, server: b.server}
	if ready.Socket, ready.Connect, err = r.nthClient(socket, bridges.open); err != nil || !canMeasureMemory {
		return err
	}
	r.logf("measuring the memory of mcpmux and one %s for %d clients...", b.name, r.n.Copies)
	bridges.pids = nil
	return r.sharedMemory(d, bridges, shared)
}

// bridgeDialer opens sessions through `mcpmux connect` and keeps the pids
// of the bridges it started.
type bridgeDialer struct {
	mcpmux, config, server string
	pids                   []int
}

func (bd *bridgeDialer) open() (conn, error) {
	p, err := spawn([]string{bd.mcpmux, "connect", "--config", bd.config, "--no-autostart", bd.server}, raceEnv(), nil)
	if err != nil {
		return nil, err
	}
	bd.pids = append(bd.pids, p.pid())
	return procConn(p, 10*time.Second), nil
}

// nthClient times the Nth client of a running server, once it has Nth-1
// initialized sessions: the median over the socket and through connect.
func (r *run) nthClient(socket, connect func() (conn, error)) (overSocket, throughConnect time.Duration, err error) {
	others := make([]*client, 0, r.n.Nth)
	defer func() { err = errors.Join(err, closeAll(others)) }()
	for range r.n.Nth - 1 {
		c, err := r.dial(socket)
		if err != nil {
			return 0, 0, err
		}
		others = append(others, c)
		if err := errors.Join(c.initialize(), c.listTools()); err != nil {
			return 0, 0, err
		}
	}
	if overSocket, err = r.timeClient(socket, r.n.SocketReps); err != nil {
		return 0, 0, fmt.Errorf("over the socket: %w", err)
	}
	if throughConnect, err = r.timeClient(connect, r.n.ConnectReps); err != nil {
		return 0, 0, fmt.Errorf("through mcpmux connect: %w", err)
	}
	return overSocket, throughConnect, nil
}

// sharedMemory opens Copies sessions through bridges to the daemon d and
// measures the memory of the daemon, of its server's tree and of the
// bridges.
func (r *run) sharedMemory(d *daemon, bridges *bridgeDialer, shared *Shared) (err error) {
	clients := make([]*client, 0, r.n.Copies)
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	for range r.n.Copies {
		c, err := r.dial(bridges.open)
		if err != nil {
			return err
		}
		clients = append(clients, c)
		if err := errors.Join(c.initialize(), c.listTools()); err != nil {
			return err
		}
	}
	kids, err := descendants(d.pid())
	if err != nil {
		return err
	}
	if shared.Daemon, err = memOf(d.pid()); err != nil {
		return err
	}
	if shared.Server, err = sumMem(kids); err != nil {
		return err
	}
	shared.Bridges, err = sumMem(bridges.pids)
	return err
}

// timeClient opens reps sessions one after the other with open and returns
// the median time from open to the answer of tools/list.
func (r *run) timeClient(open func() (conn, error), reps int) (time.Duration, error) {
	times := make([]time.Duration, reps)
	for i := range reps {
		t0 := time.Now()
		c, err := r.dial(open)
		if err != nil {
			return 0, err
		}
		err = errors.Join(c.initialize(), c.listTools())
		times[i] = time.Since(t0)
		if err := errors.Join(err, c.Close()); err != nil {
			return 0, err
		}
	}
	return median(times), nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// peak measures a fresh daemon running b: its RSS, then its peak RSS once
// PeakSessions sessions on its socket have each read a HugeSizes[1] result
// at once, PeakReps times.
func (r *run) peak(b backend) (pk Peak, err error) {
	pk = Peak{Sessions: r.n.PeakSessions, Size: r.n.HugeSizes[1], Reps: r.n.PeakReps}
	r.logf("measuring the daemon's peak memory while %d sessions read %s at once...", pk.Sessions, mb(pk.Size))
	d, err := startDaemon(r.ctx, filepath.Join(r.dir, "p"), r.o.Mcpmux, 64, serverConf{name: b.server, argv: b.argv})
	if err != nil {
		return pk, err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	clients := make([]*client, 0, pk.Sessions)
	defer func() { err = errors.Join(err, closeAll(clients)) }()
	for range pk.Sessions {
		c, err := r.dial(func() (conn, error) { return dialUnix(d.socket(b.server)) })
		if err != nil {
			return pk, err
		}
		clients = append(clients, c)
		if err := warm(c, 1); err != nil {
			return pk, err
		}
	}
	if pk.Base, err = peakOf(d.pid()); err != nil {
		return pk, err
	}
	for range pk.Reps {
		errs := make([]error, len(clients))
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() { _, _, errs[i] = hugeResults(c, pk.Size, 1) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return pk, err
		}
	}
	pk.HWM, err = peakOf(d.pid())
	return pk, err
}
