// Package socket owns mcpmux's listeners: the private folder that holds the
// per-server Unix sockets, the sockets themselves (created 0600 with no
// moment at which they are wider, a live one never stolen, a stale one taken
// over), the peer-credential check that refuses other users, yamux on those
// sockets (one session per stream), and the loopback web listener with its
// Host, Origin and token checks, its WebSocket upgrade, and Streamable HTTP
// (each HTTP session a transport of its own).
//
// It knows the routing layer only through small callbacks: it hands each
// finished connection, stream or WebSocket transport to its caller, who owns
// it from then on. It is written for Linux and macOS.
package socket
