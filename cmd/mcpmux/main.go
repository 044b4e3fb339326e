// Command mcpmux runs one process per configured MCP server and shares it
// among many clients. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpmux/mcpmux/upstream"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == reaperMode { // a hidden mode, see reaperMode
		os.Exit(upstream.RunReaper(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful shutdown; from then on a second one
	// kills mcpmux at once, and the reapers take the servers down with it.
	context.AfterFunc(ctx, stop)
	err := newRootFor(os.Args[1:]).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpmux:", err)
		os.Exit(1)
	}
}
