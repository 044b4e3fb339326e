// Package outbox owns mcpmux's one write path: a Queue of frames bounded in
// bytes, on its way to one connection (a client's, or a server's stdin).
// Producers queue frames with Send, or hold them with SendLater while they
// have more input at hand, and Flush the run once they have none: the run
// then goes out in one write, from the producer's own goroutine when the
// connection's writer is idle and the write cannot block, else from the
// writer goroutine, which alone writes anything that may block. Either the
// Queue's owner runs it for the connection's life (Run: a server's stdin),
// or the Queue starts it only while frames wait for it and lets it end
// once they are written (Serve: a client's connection, idle most of the
// time, which then costs no goroutine).
//
// session.Session and upstream.Process each own one Queue and set its
// policies: what a full queue means (a client evicted, a request refused),
// and what the high-water mark stops (reading from the clients). A producer
// that may wait rather than be refused uses SendLaterOr.
//
// A Budget bounds many queues together (every session of a daemon): each
// counts its bytes against it through a Share, and past the budget the one
// holding the most is evicted first. Lock order: a Queue's lock, then its
// Budget's; eviction runs under neither.
//
// A Frame may carry a Release, which the Writer calls once it no longer
// refers to the frame's bytes, so that a large answer's buffer is reused;
// the Queue itself never calls it (a dropped frame's buffer is collected).
package outbox
