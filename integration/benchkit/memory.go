package benchkit

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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

	// One server per client: Copies cold starts, one after the other,
	// each kept running.
	r.logf("starting %d copies of %s, one after the other...", r.n.Copies, b.name)
	copies := make([]*client, 0, r.n.Copies)
	defer func() { err = errors.Join(err, closeAll(copies)) }()
	var pids []int
	cold := make([]time.Duration, 0, r.n.Copies)
	for range r.n.Copies {
		t0 := time.Now()
		var pid int
		c, err := r.dial(func() (conn, error) {
			p, err := spawn(b.argv, nil, nil)
			if err != nil {
				return nil, err
			}
			pid = p.pid()
			return procConn(p, 5*time.Second), nil
		})
		if err != nil {
			return ready, shared, err
		}
		copies = append(copies, c)
		if err := errors.Join(c.initialize(), c.listTools()); err != nil {
			return ready, shared, fmt.Errorf("copy %d: %w", len(copies), err)
		}
		cold = append(cold, time.Since(t0))
		pids = append(pids, pid)
	}
	ready.Cold = median(cold)
	if canMeasureMemory {
		for _, pid := range pids {
			kids, err := descendants(pid)
			if err != nil {
				return ready, shared, err
			}
			m, err := sumMem(append(kids, pid))
			if err != nil {
				return ready, shared, err
			}
			shared.Each = shared.Each.plus(m)
		}
	}
	err = closeAll(copies)
	copies = nil
	if err != nil {
		return ready, shared, err
	}

	// One server for every client, run by mcpmux.
	r.logf("measuring the %dth client of a running %s...", r.n.Nth, b.name)
	d, err := startDaemon(r.ctx, filepath.Join(r.dir, "b"), r.o.Mcpmux, 64, serverConf{name: b.server, argv: b.argv})
	if err != nil {
		return ready, shared, err
	}
	defer func() { err = errors.Join(err, d.stop()) }()
	socket := func() (conn, error) { return dialUnix(d.socket(b.server)) }
	var bridgePids []int
	connect := func() (conn, error) {
		p, err := spawn([]string{r.o.Mcpmux, "connect", "--config", d.config, "--no-autostart", b.server}, raceEnv(), nil)
		if err != nil {
			return nil, err
		}
		bridgePids = append(bridgePids, p.pid())
		return procConn(p, 10*time.Second), nil
	}
	others := make([]*client, 0, r.n.Nth)
	defer func() { err = errors.Join(err, closeAll(others)) }()
	for range r.n.Nth - 1 {
		c, err := r.dial(socket)
		if err != nil {
			return ready, shared, err
		}
		others = append(others, c)
		if err := errors.Join(c.initialize(), c.listTools()); err != nil {
			return ready, shared, err
		}
	}
	if ready.Socket, err = r.timeClient(socket, r.n.SocketReps); err != nil {
		return ready, shared, fmt.Errorf("over the socket: %w", err)
	}
	if ready.Connect, err = r.timeClient(connect, r.n.ConnectReps); err != nil {
		return ready, shared, fmt.Errorf("through mcpmux connect: %w", err)
	}
	err = closeAll(others)
	others = nil
	if err != nil || !canMeasureMemory {
		return ready, shared, err
	}

	r.logf("measuring the memory of mcpmux and one %s for %d clients...", b.name, r.n.Copies)
	bridgePids = nil
	for range r.n.Copies {
		c, err := r.dial(connect)
		if err != nil {
			return ready, shared, err
		}
		others = append(others, c)
		if err := errors.Join(c.initialize(), c.listTools()); err != nil {
			return ready, shared, err
		}
	}
	kids, err := descendants(d.pid())
	if err != nil {
		return ready, shared, err
	}
	if shared.Daemon, err = memOf(d.pid()); err != nil {
		return ready, shared, err
	}
	if shared.Server, err = sumMem(kids); err != nil {
		return ready, shared, err
	}
	if shared.Bridges, err = sumMem(bridgePids); err != nil {
		return ready, shared, err
	}
	return ready, shared, nil
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
