//go:build mcpgoconf

// Command mcpgoconf is mark3labs/mcp-go's conformance server, the fixtures
// of the official MCP conformance suite as mcp-go's own CI runs it
// (examples/conformance/main.go of the module in go.mod), with a -stdio
// switch so that mcpmux can run it as a child.
//
// This folder holds only the switch. The conformance tier
// (integration/conformance_mcpgo_test.go) builds it with -tags mcpgoconf
// and an -overlay that adds the module's examples/conformance/main.go to
// this package as conformance.go, unchanged: without -stdio it is that
// server as it is, over Streamable HTTP on $CONFORMANCE_ADDR
// (127.0.0.1:3000 by default) with GET /health; with -stdio it serves the
// same fixtures over stdio. The build tag keeps the folder out of a plain
// go build ./..., where the example's functions are missing.
package main

import (
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/server"
)

// init takes -stdio before the example's main runs (main serves HTTP and
// has no flags of its own), so the example is built as its module ships
// it. The options are main's, which builds its server inline.
func init() {
	if len(os.Args) != 2 || os.Args[1] != "-stdio" {
		return
	}
	s := server.NewMCPServer(
		"mcp-go-conformance",
		"1.0.0",
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithCompletions(),
		server.WithLogging(),
		server.WithElicitation(),
	)
	s.EnableSampling()
	registerTools(s)
	registerResources(s)
	registerPrompts(s)
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintln(os.Stderr, "mcpgoconf:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
