// Package bridge owns `mcpmux connect`: it joins a client that can only
// spawn a command, on its stdin and stdout, to the session of one server
// on the daemon's Unix socket, and keeps that client going when the
// session ends under it. It owns the forwarder, a pump: lines pass byte
// for byte through fixed buffers, a line longer than a buffer piece by
// piece as it comes, never held whole; only each line's head is scanned
// (frameScan) for the ids of the requests in flight, so that a lost
// session answers them, and only the rare line that sets the session up,
// or that the bridge keeps from the client, is parsed. It owns too
// the replay that sets a new session up as the client had set up the lost
// one, reconnection with backoff, and auto-start: when no daemon answers,
// it starts one (`mcpmux serve`, in a session of its own, logging to the
// state folder) under a lock in the socket folder, so that many connects
// started at once start exactly one.
//
// It does not read the config file or the daemons' records itself: its
// caller says where the daemon of the file serves (Config.Find, asked
// anew at every reconnect), how to ask that daemon what it serves, and how
// to start one. Run bridges until stdin ends and the answers due are in,
// ctx ends, or it gives up; it writes only to the writers it is given.
//
// # Goroutines
//
//   - Run's own (bridge.run), which owns the links and writes to stdout
//     whenever no link is up;
//   - one socket reader per link, started by bridge.up, which copies the
//     daemon's lines to stdout while its link is up; run waits for each;
//   - the stdin reader, started by bridge.run, which is deliberately not
//     waited for: a read from a blocking stdin cannot be interrupted. It
//     ends at stdin's end, once the bridge is over, or with the process;
//   - the reaper of an auto-started daemon (dialer.startDaemon), which is
//     not waited for either: the daemon outlives the bridge, and once the
//     bridge's process exits, init adopts it.
//
// awaitAnswer arms a function that cuts its read short when ctx ends
// (context.AfterFunc), and disarms it before it returns.
package bridge
