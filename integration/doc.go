// Package integration is mcpmux's end-to-end test tier: its tests build the
// real mcpmux binary and the demo MCP server (./demoserver), start the daemon
// from a config file in a short temporary folder, and talk to it the way
// users and outside tests do: over <socket_dir>/NAME.sock and through
// `mcpmux connect`. The package holds no code of its own besides this doc;
// everything lives in its _test.go files.
package integration
