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
//
// # Goroutines
//
// Start runs a Process's goroutines (Process.run): its stdout reader
// (readLoop), which hands the Handler each message, one at a time; its
// stdin writer (writeLoop), which writes what the write queue holds; its
// stderr reader (stderrLoop), when the Process reads the server's stderr;
// and its waiter (waitLoop), which owns the other three: it waits for the
// process, kills what is left of its group, lets the readers drain, waits
// for them, and closes Done last.
//
// A SIGKILL asked of the reaper arms a backstop timer (Process.signal) that
// kills the group itself if the reaper has not acted within its grace.
// Nobody waits for it: it takes the Process's lock and acts only while the
// leader lives, and killGroup stops it. The reaper (RunReaper, a process of
// its own) watches its parent on macOS from a kqueue goroutine
// (watchParent), which lives as long as the reaper does.
package upstream
