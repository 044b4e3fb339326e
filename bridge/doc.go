// Package bridge owns `mcpmux connect`: it joins a client that can only
// spawn a command, on its stdin and stdout, to the session of one server
// on the daemon's Unix socket, and keeps that client going when the
// session ends under it. It owns the forwarder (lines pass byte for byte,
// the requests in flight are tracked so that a lost session answers them),
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
package bridge
