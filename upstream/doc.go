// Package upstream supervises one stdio MCP server process: it spawns the
// executable directly in its own process group with a filtered environment,
// frames what the server writes on stdout into JSON-RPC messages for a
// Handler, feeds its stdin from a write queue bounded in bytes (an
// outbox.Queue), watches for a server that stops reading or floods stdout
// with junk, routes its stderr, and stops it by closing stdin, then
// SIGTERM, then SIGKILL to the whole group.
// With a reaper (Config.Reaper, RunReaper: the mcpmux binary re-executed in
// a hidden mode) leading the group, the server and its descendants die with
// mcpmux even when mcpmux itself is SIGKILLed.
//
// A Process is one run of one server. It never restarts anything: when Done
// is closed the process has been reaped, its group killed and every goroutine
// of the Process has returned, and the owner (the hub) decides whether to call
// Start again. The package is written for Linux and macOS.
package upstream
