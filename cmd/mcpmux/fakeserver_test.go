package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// fakeServerTable is a [servers.NAME] table that runs this test binary as
// testutil.FakeServer, in the given mode ("serve", or "exit N": a server
// that cannot start), plus extra lines.
func fakeServerTable(name, mode string, extra ...string) string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("[servers.%s]\ncommand = %q\nenv = { %s = %q }\nstdin_grace = \"0s\"\nterm_grace = \"1s\"\n%s\n",
		name, exe, testutil.FakeServerEnv, mode, strings.Join(extra, "\n"))
}
