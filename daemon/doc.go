// Package daemon runs what `mcpmux serve` is: the control socket (the lock
// on the socket folder), one socket and one router per configured server,
// the optional web listener, reloads that change the set of servers while
// it runs, shutdown in dependency order and the exit when idle. It reads no
// flag or environment variable: cmd/mcpmux hands it a Config, and a
// function that loads the configuration again. Client is the other side of
// the control endpoint, for the commands that ask a running daemon.
//
// What serve keeps in files is here too, in folders its caller names. In
// the state folder (Config.StateDir), Run keeps the daemon's Record of
// where it serves while it does (the clients that look for the daemon of
// a config file read it back), and each server's memory across runs (what
// it was seen doing, by how it starts). LogFile is the log, rotated by
// size, of a daemon started by mcpmux connect.
//
// One goroutine, Run's, changes the set of servers; the control endpoint
// and the web listener only look servers up, under Daemon.mu.
//
// # Goroutines
//
// Daemon.Run starts them all and returns only after every one has ended:
//   - the intake: the control endpoint (serveControl, whose http.Server
//     serves on a goroutine of its own that serveControl waits for on every
//     path) and the web listener (socket.Web.Serve). When ctx ends, Run
//     waits for both before it stops any server;
//   - the idle check (exitWhenIdle), when IdleExit is set: it asks each
//     server's Status now and then and ends Run's context once none has had
//     a session for IdleExit. Run waits for it first;
//   - for each server, two goroutines in the daemon's wait group: its
//     router (mux.Server.Run), which Daemon.start adds, and its socket's
//     accept loop with the sessions on it (socket.Serve, serveUnix), which
//     Daemon.serveIntake adds. A
//     server that reload removes, or the shutdown, stops the socket and its
//     sessions first, waits, then stops the router (served.stop); Run waits
//     for the group last;
//   - for each endpoint, one goroutine that Daemon.serveIntake adds to
//     the group for Daemon.startEndpoint: its socket's accept loop with its sessions, each of which
//     holds a session of every member's router (endpoint.Endpoint.Serve).
//     The shutdown stops the endpoints' sockets and sessions before any
//     server's.
//
// Reloads run on Run's own goroutine (takeReloads): Daemon.Reload, called
// by the control endpoint or on a signal, hands each one over and waits for
// the outcome.
package daemon
