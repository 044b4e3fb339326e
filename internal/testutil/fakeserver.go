package testutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// FakeServerEnv, set in a server's environment, makes a test binary whose
// TestMain calls BecomeFakeServer that server: a scripted stdio MCP server
// (see FakeServer), in the mode the variable names ("serve", or "exit N").
// FakeTagEnv, also set, is what it answers "whoami" with.
const (
	FakeServerEnv = "MCPMUX_FAKE_SERVER"
	FakeTagEnv    = "FAKE_TAG"
)

// BecomeFakeServer makes this process the fake server when FakeServerEnv
// is set: it serves stdin and stdout as FakeServer and exits. Otherwise it
// returns. A TestMain calls it first:
//
//	func TestMain(m *testing.M) {
//		testutil.BecomeFakeServer()
//		testutil.Main(m)
//	}
func BecomeFakeServer() {
	if mode := os.Getenv(FakeServerEnv); mode != "" {
		os.Exit(FakeServer(mode, os.Stdin, os.Stdout, os.Stderr))
	}
}

// FakeServer is a scripted stdio MCP server, for the tests of what runs
// servers (the daemon, the command line). In mode "exit N" it writes a line
// on stderr and returns N at once, as a server that cannot start does. In
// any other mode it serves until in ends, then returns 0: it answers
// initialize (with the protocol version asked for, a tools capability and
// serverInfo "fake"), "whoami" with its pid and $FAKE_TAG, holds every
// "hold" request until a "release" request comes (then answers them all,
// and the release), and answers any other request with an empty result. It
// ignores notifications and answers.
func FakeServer(mode string, in io.Reader, out, stderr io.Writer) int {
	if code, ok := strings.CutPrefix(mode, "exit "); ok {
		fmt.Fprintln(stderr, "fake server: told to exit", code)
		n, _ := strconv.Atoi(code)
		return n
	}
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	var held []json.RawMessage
	answer := func(id json.RawMessage, result any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
		w.Write(append(b, '\n'))
	}
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
		switch m.Method {
		case "initialize":
			answer(m.ID, map[string]any{
				"protocolVersion": m.Params.ProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "fake", "version": "1"},
			})
		case "whoami":
			answer(m.ID, map[string]any{"pid": os.Getpid(), "tag": os.Getenv(FakeTagEnv)})
		case "hold":
			held = append(held, m.ID)
		case "release":
			for _, id := range held {
				answer(id, map[string]any{"released": true})
			}
			held = nil
			answer(m.ID, map[string]any{})
		default:
			answer(m.ID, map[string]any{})
		}
		if err := w.Flush(); err != nil {
			fmt.Fprintln(stderr, "fake server:", err)
			return 1
		}
	}
}
