// Package session is one downstream MCP connection as mcpmux serves it: a
// read loop that no input can kill, one writer, and an outbox bounded in
// bytes (an outbox.Queue). What the messages mean is not its business; it
// hands each valid message to a Handler (the hub) and answers malformed
// ones itself.
//
// Flow control comes before eviction. While a session has its maximum of
// requests in flight, or its outbox is above the high-water mark, or the
// Handler says the server cannot take more, the session simply stops reading
// its client, so a client that pipelines is slowed, never dropped. Only a
// client whose outbox passes the hard maximum, because it stopped reading
// altogether, is disconnected.
//
// # Goroutines
//
// Session.Run starts the goroutines of a session and returns after every
// one of them has, with the transport closed:
//   - the read loop (Session.readLoop), on Run's own goroutine, which reads
//     the client's frames and calls the Handler one message at a time;
//   - the writer, which the outbox (outbox.Queue.Serve) starts only while
//     it holds frames that a Flush may not write on its caller's goroutine,
//     and which ends once they are written: an idle session has no writer.
//     It alone writes what may block. Run stops it from starting again and
//     waits for it (Session.finishWrites);
//   - a function run when Run's ctx ends (context.AfterFunc, in
//     Session.Run), which ends the session; Run waits for it, or stops it
//     when its ctx never ended;
//   - the closing of the transport (Session.closeTransport), which
//     Session.closeWith starts when the session ends: it unblocks the
//     reader and a writer stuck on a client that stopped reading (one that
//     half-closed first gets flushTimeout to take what was queued). Run
//     waits for it (closing);
//   - the read-ahead (Session.startAhead): while a Handler method holds up
//     the read loop in Session.Await (a request waiting for its server to
//     start), the transport's next frame is read on a goroutine of its own,
//     so that the session sees its client leave; the read loop takes that
//     frame before it reads again, so the transport is never read twice at
//     once. The closing of the transport ends it, and Run waits for it
//     (aheadWG). Session.Await's own goroutine watches that read and
//     cancels the wait when the client has gone; Await waits for it before
//     it returns.
//
// A session over an Unqueued transport (the one request of a 2026-07-28
// POST) has neither writer nor outbox, and Session.runUnqueued starts no
// goroutine: the read loop runs on Run's own goroutine, the end of the
// session closes the transport at once (closeWith), and one function run
// when Run's ctx ends (context.AfterFunc) ends the session; Run waits for
// it, or stops it when its ctx never ended. The read-ahead is as above.
//
// A WebSocket transport has one more, its keepalive (started by
// NewWebSocket): it pings the client and closes a connection whose pings
// go unanswered while the session reads. WebSocket.Close stops it and
// waits for it.
package session
