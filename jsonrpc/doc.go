// Package jsonrpc is the wire vocabulary that every other mcpmux package
// shares: newline framing under a size limit, a strict parser for the
// JSON-RPC 2.0 envelope, byte splicing of ids and tokens, and the error
// frames mcpmux emits.
//
// Payloads are never decoded into Go values. A message is kept as the bytes
// that arrived; the parser records where the envelope's members sit in them,
// and a rewrite copies the frame once with the new bytes spliced in. The
// parser is strict so that mcpmux and the peer on the other side can never
// read a different id, method or kind out of the same bytes: the whole frame
// must be valid UTF-8 JSON, and each reserved member may appear only once and
// only in its exact spelling.
//
// A frame of more than 64 KiB is checked as it is read, a buffer-full at a
// time (Reader.Checked, ParseChecked), and put together in a pooled buffer
// that its last user gives back with Recycle; a frame never recycled is
// the garbage collector's, like any other.
package jsonrpc
