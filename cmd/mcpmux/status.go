package main

import (
	"fmt"
	"io"

	"github.com/mcpmux/mcpmux/daemon"
)

// printConfigLine ends the head of `mcpmux status`: which config file the
// daemon serves (a daemon of an older mcpmux does not say), a warning when
// it serves no server at all, and the blank line before the table.
func printConfigLine(w io.Writer, st daemon.Status) {
	if st.Config != "" {
		fmt.Fprintf(w, "config %s\n", st.Config)
	}
	if len(st.Servers) == 0 {
		fmt.Fprintln(w, "warning: no servers: the config has no [servers.NAME] table; add one, then `mcpmux reload`")
	}
	fmt.Fprintln(w)
}
