// Package streamable owns mcpmux's Streamable HTTP transport: the HTTP
// handling of POST, GET and DELETE on a server's endpoint once the web
// listener's checks have passed, and the sessions it makes of them.
//
// In the 2025 binding (MCP 2025-03-26 to 2025-11-25) an initialize request
// starts an HTTP session, named by Mcp-Session-Id on every later request;
// each HTTP session is one session.Transport that an Endpoint serves like
// any other session. The transport only places frames on streams: each POST
// that carries requests gets an SSE stream whose number is the tag of the
// frame it hands to the session, and every frame that comes back goes on
// the stream its tag names (tag 0: the session's GET stream); the last frame
// for a tag ends its stream. It keeps no ids, progress tokens or
// cancellations of its own: what belongs where is the router's to say, by
// the tag. Streams keep their last events for Last-Event-ID resumption,
// within bounds, and a session with no request for its idle time ends.
//
// In the 2026-07-28 binding there is no HTTP session: a POST without
// Mcp-Session-Id that names that revision (in MCP-Protocol-Version or in
// its request's _meta envelope) carries one request, which is checked
// against the headers (modern.go) and served on a session of its own, a
// oneShot transport that lives as long as the POST. The response's status
// waits for the first frame about the request (reply.go), and closing the
// response ends the session, which cancels the request at the server. The
// tool definitions that the Mcp-Param headers are checked against come
// from the server's tools/list, asked for on such a session
// (toolparams.go).
//
// Every refusal it makes is a JSON-RPC error body (application/json) with
// data.reason and data.server, under the HTTP status the transport's
// specification gives.
//
// # Goroutines
//
// Each session runs on a goroutine of its own, and Handler.Close waits for
// every one of them (Handler.active):
//   - a 2025 HTTP session, started by Handler.admit for its initialize
//     request, outlives that request: it ends when the client deletes it,
//     when it has been idle too long, when it is evicted to make room, or
//     on Close;
//   - the session of one 2026-07-28 request (Handler.serveOne), and of
//     mcpmux's own tools/list, runs on its POST's own goroutine, with no
//     goroutine of its own: the session reads the request, then its
//     transport (a oneShot, session.Unqueued) holds the POST, writing what
//     the session sent, until the answer is complete or the client leaves.
//
// Two timers act on a session's state and nobody waits for them: each takes
// the lock of what it acts on and acts only if that is still as it left it,
// so stopping one is enough. An HTTP session's idle timer (armed by
// transport.leave when its last request ends, stopped when another comes)
// ends a session that stayed idle; a POST's header timer (armed by
// stream.startSoon, stopped by the first event) sends the response's
// headers when no event came within headerDelay.
//
// # Locks
//
// Locks nest in one order: the Handler's, then a transport's (to find the
// idlest session); a transport's, then its streams'. When a final event
// placed under its own stream's lock retires another stream (tryPlace), it
// takes that stream's lock by TryLock only, so it never waits for it. A
// session's memo saves and touches its record in the
// Store under its own lock (for a FileStore, a file written and renamed).
// Nothing else blocks or writes under a lock, and every unlock is deferred;
// TestLocks reads the source to keep it so.
package streamable
