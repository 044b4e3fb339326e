// Package endpoint serves a named set of servers as one MCP server: each
// client session of an endpoint is an MCP client of every member server's
// router, through one in-process session per member (a pipe, so that every
// rule of the routers applies unchanged). The package owns what is the
// endpoint's alone: the renaming (tool and prompt names prefixed with their
// server's name and the separator), the merging of lists, capabilities and
// instructions, the routing by prefix and by resource URI, and the
// endpoint's tool view.
//
// # Goroutines
//
//   - the client session's own, which Endpoint.Serve runs and waits for;
//   - one per member, started by conn.open, which serves the member's
//     session of its router (Member.Serve); Endpoint.Serve waits for each
//     after the client's session ends.
//
// What a member's router writes reaches the endpoint on the goroutine that
// writes that session's frames (its writer, or the router's own when it
// flushes: pipe.TryWrite), which only ever queues frames for the client
// and never waits on a member.
package endpoint
