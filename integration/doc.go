// Package integration is mcpmux's end-to-end test tier: its tests build the
// real mcpmux binary and the demo MCP server (./demoserver), start the daemon
// from a config file in a short temporary folder, and talk to it the way
// users and outside tests do: over <socket_dir>/NAME.sock and through
// `mcpmux connect`. The package holds no code of its own besides this doc;
// everything lives in its _test.go files.
//
// The folder is a Go module of its own, which replaces mcpmux's module with
// the parent folder: the test peers (the official Go SDK, mcp-go) and the
// benchmark's chart library are its requirements, not mcpmux's. Run its
// tests from here (cd integration && go test ./...); ./scripts/test runs
// both modules.
package integration
