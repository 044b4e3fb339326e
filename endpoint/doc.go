// Package endpoint serves a named set of servers as one MCP server: each
// client session of an endpoint is an MCP client of every member server's
// router, through one in-process session per member. The package owns the
// renaming (tool and prompt names prefixed with their server's name), the
// merging of lists and capabilities, the routing by prefix, and the
// endpoint's tool view; every other rule is the member routers'.
package endpoint
