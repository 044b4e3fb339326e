// Package socket owns mcpmux's listeners: the private folder that holds the
// per-server Unix sockets (and where it is by default), the sockets
// themselves (created 0600 with no moment at which they are wider, a live
// one never stolen, a stale one taken over), the peer-credential check that
// refuses other users on both ends (Dial is the clients' way in: it checks
// the folder and the listener's uid before they send a byte), yamux on those
// sockets (one session per stream), and the loopback web listener with its
// Host, Origin and token checks and its WebSocket upgrade; the listener
// hands every other request on a server's endpoint to package streamable.
//
// It knows the routing layer only through small callbacks: it hands each
// finished connection, stream or WebSocket transport to its caller, who owns
// it from then on. It is written for Linux and macOS.
//
// # Goroutines
//
// Each function that serves returns only after the goroutines it started:
//   - Serve runs each accepted connection's handler on a goroutine of its
//     own, and one more that closes the listener when ctx ends; it waits
//     for all of them;
//   - ServeYamux runs each stream's handler on a goroutine of its own, and
//     watchPeer, which closes the connection of a client that sent nothing
//     for its stall timeout beyond a ping interval, and waits for them; the end of ctx closes the yamux session (a function
//     run when it comes, context.AfterFunc), which ends the accept loop;
//   - Web.Serve runs its http.Server on a goroutine of its own and waits for
//     it on every path; the requests, and the WebSocket sessions on their
//     hijacked connections, run on net/http's goroutines, and Serve waits
//     for the sessions (active) as well.
//
// Sniff arms a function that cuts its read short when ctx ends
// (context.AfterFunc), and disarms it before it returns.
//
// # Locks
//
// One nesting, in one order: umaskMu, then syscall.ForkLock (for reading),
// while bindPrivate makes and binds a socket under umask 0177. Nothing
// blocks or writes under a lock, and every unlock is deferred; TestLocks
// reads the source to keep it so.
package socket
