package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// fakeEnv, when set, makes the test binary the MCP server under test: see
// runFakeServer.
const fakeEnv = "MCPMUX_DAEMON_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) != "" {
		os.Exit(runFakeServer(os.Stdin, os.Stdout))
	}
	testutil.Main(m) // fails the run on leaked goroutines
}

// runFakeServer is a scripted stdio MCP server. It answers initialize,
// answers "whoami" with its pid and $FAKE_TAG, holds every "hold" request
// until a "release" request comes (then answers them all), and answers
// any other request with an empty result.
func runFakeServer(in io.Reader, out io.Writer) int {
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
			answer(m.ID, map[string]any{"pid": os.Getpid(), "tag": os.Getenv("FAKE_TAG")})
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
			fmt.Fprintln(os.Stderr, "fake server:", err)
			return 1
		}
	}
}
