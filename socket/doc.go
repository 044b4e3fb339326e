// Package socket owns mcpmux's local listeners: the private folder that holds
// the per-server Unix sockets, the sockets themselves (created 0600 with no
// moment at which they are wider, a live one never stolen, a stale one taken
// over), the peer-credential check that refuses other users, and the accept
// loop that hands each finished connection to a callback.
//
// The package knows nothing about MCP: it delivers net.Conn values and the
// caller owns them from then on. It is written for Linux and macOS.
package socket
