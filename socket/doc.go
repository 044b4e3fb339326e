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
package socket
