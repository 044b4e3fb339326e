package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// fakeServerEnv, set in a server's env, makes the test binary a stdio MCP
// server: it answers initialize, and every other request with an empty
// result. Set to "exit N", it writes a line on stderr and exits N at once,
// as a server that cannot start does.
const fakeServerEnv = "MCPMUX_CMD_FAKE_SERVER"

// fakeServerTable is a [servers.NAME] table that runs the fake server, in
// the given mode ("serve", or "exit N"), plus extra lines.
func fakeServerTable(name, mode string, extra ...string) string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("[servers.%s]\ncommand = %q\nenv = { %s = %q }\nstdin_grace = \"0s\"\nterm_grace = \"1s\"\n%s\n",
		name, exe, fakeServerEnv, mode, strings.Join(extra, "\n"))
}

func runFakeServer(in io.Reader, out, stderr io.Writer) int {
	if code, ok := strings.CutPrefix(os.Getenv(fakeServerEnv), "exit "); ok {
		fmt.Fprintln(stderr, "fake server: told to exit", code)
		n, _ := strconv.Atoi(code)
		return n
	}
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil || m.Method == "" {
			continue // notifications and answers
		}
		result := any(map[string]any{})
		if m.Method == "initialize" {
			result = map[string]any{
				"protocolVersion": m.Params.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "fake", "version": "1"},
			}
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
		w.Write(append(b, '\n'))
		if err := w.Flush(); err != nil {
			return 1
		}
	}
}
