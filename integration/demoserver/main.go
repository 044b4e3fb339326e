// Command demoserver is a small stdio MCP server with two jobs.
//
// Users run it through examples/mux.toml to try mcpmux without installing a
// third-party server. mcpmux's integration tests spawn it as a child process
// and ask it to misbehave: print junk on stdout, crash, hang, ignore EOF or
// SIGTERM, leave a grandchild behind, answer slowly with progress, or report
// what it has seen through the stats tool.
//
// The wire is newline-delimited JSON-RPC 2.0: one message per line on stdin,
// one compact message per line on stdout. Logs go to stderr as plain lines.
// Requests are served concurrently, ids are echoed back byte for byte, and no
// input, however malformed, ends the process.
//
// Besides initialize, ping and empty resource and prompt lists, it offers
// these tools:
//
//	echo {text}           returns text, also as structuredContent
//	add {a, b}            returns the sum as text
//	slow {ms, steps}      waits, with progress if asked; a cancel stops it unanswered
//	crash {code}          exits at once (default code 3) without answering
//	junk {lines}          writes non-JSON lines to stdout, then answers
//	huge {bytes}          returns that many 'x' bytes of text
//	stderr {text}         writes text to stderr
//	stats {}              reports counts, cancellations, tokens and recent methods
//	notify {method, params} sends that notification, then answers
//	ask {text}            asks the client for a sampling and returns its text
//	invalid {kind, bytes} answers with a NaN (or, kind latin1, a Latin-1 byte) after bytes of padding: no valid JSON
//
// Misbehaviour is chosen at start by flags or by the DEMO_MODE environment
// variable (comma-separated words, the flag names without dashes, such as
// "banner=2,ignore-eof"). Flags on the command line win over DEMO_MODE:
//
//	--banner N         print N junk lines to stdout before reading anything
//	--ignore-eof       keep running after stdin reaches EOF
//	--ignore-sigterm   ignore SIGTERM
//	--grandchild       spawn a grandchild that ignores SIGTERM and sleeps forever
//	--no-read          never read stdin, but stay alive
//	--crash-after N    exit with code 3 after answering N requests
//	--stderr-noise     write a line to stderr for every request
//	--max-line N       longest stdin line accepted, in bytes (default 64 MiB)
//
// Without any of them it is a well-behaved server that exits 0 when stdin
// closes.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
