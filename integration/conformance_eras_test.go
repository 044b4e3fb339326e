package integration

// The server's own part of the bridged rows of the conformance tier: what
// the go-sdk conformance server, opened over stdio in one era, cannot do
// for a client of the other era whatever stands between them. The go-sdk
// fixes one era per connection, from its first message (initialize, or a
// request carrying the 2026-07-28 envelope: ServerSession.InitializeParams):
//
//   - opened modern, it refuses to send the sampling and elicitation
//     requests its legacy tools rely on, request by request
//     (assertServerInitiatedRequestAllowed), so a legacy client's
//     tools-call-sampling, tools-call-elicitation,
//     elicitation-sep1034-defaults and elicitation-sep1330-enums cannot pass
//     on that process;
//   - opened legacy, it fulfils the input requests of its 2026-07-28 tools
//     itself, by sending requests (serverMultiRoundTripMiddleware, keyed on
//     the connection's initialize), so the keys it gives them
//     ("user_name") never reach the wire, and
//     input-required-result-basic-elicitation, which checks the key, cannot
//     pass on that process.
//
// Each is measured here, directly over stdio, on a process of the server
// opened as mcpmux opens it: a scenario is excused through mcpmux only if
// this run shows the server itself behaving so.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// confEraTools are the scenarios of one era's suites that the server may
// fail on a process opened in the other, each with the tool it calls.
var confEraTools = map[bool]map[string]string{
	// legacy suites, on a process opened modern
	true: {
		"tools-call-sampling":          "test_sampling",
		"tools-call-elicitation":       "test_elicitation",
		"elicitation-sep1034-defaults": "test_elicitation_sep1034_defaults",
		"elicitation-sep1330-enums":    "test_elicitation_sep1330_enums",
	},
	// the 2026-07-28 set, on a process opened legacy
	false: {
		"input-required-result-basic-elicitation": "test_input_required_result_elicitation",
	},
}

// confEnvelope is the _meta of a 2026-07-28 client that can sample and
// elicit.
const confEnvelope = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{},"roots":{}}}`

// confServerOwn opens the conformance server srv over stdio in one era
// (modern: server/discover; else initialize) and calls each tool of
// confEraTools[modern] as a client of the other era would reach it through
// mcpmux; it returns the scenarios whose tool the server itself does not
// serve that client, each with what the server did instead.
func confServerOwn(t *testing.T, srv string, modern bool) map[string]string {
	t.Helper()
	p := startStdioPeer(t, srv)
	if modern {
		p.call(t, "server/discover", `{"_meta":`+confEnvelope+`}`)
	} else {
		p.call(t, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{},"roots":{}},"clientInfo":{"name":"probe","version":"1"}}`)
		p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	own := map[string]string{}
	for scenario, tool := range confEraTools[modern] {
		var meta string
		if modern {
			// mcpmux's up bridge: the legacy session's capabilities in the
			// envelope.
			meta = `,"_meta":` + confEnvelope
		}
		res, asked := p.call(t, "tools/call", `{"name":"`+tool+`","arguments":{"message":"probe","prompt":"probe"}`+meta+`}`)
		switch {
		case modern && len(asked) == 0 && strings.Contains(string(res), `"isError":true`):
			own[scenario] = "it sent no request and answered " + string(res)
		case !modern && len(asked) > 0:
			// Its first round went out as requests: the keys it gave them
			// were never on the wire.
			own[scenario] = "it asked by requests of its own (" + strings.Join(asked, ", ") + ") before it answered " + string(res)
		}
	}
	return own
}

// stdioPeer is a client of a server over its stdin and stdout.
type stdioPeer struct {
	in    io.WriteCloser
	lines chan string
	next  int
}

// startStdioPeer starts cmd; at cleanup its stdin is closed and it is
// killed and reaped.
func startStdioPeer(t *testing.T, cmd string) *stdioPeer {
	t.Helper()
	c := exec.Command(cmd)
	in, err := c.StdinPipe()
	require.NoError(t, err)
	out, err := c.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	p := &stdioPeer{in: in, lines: make(chan string, 64)}
	done := make(chan struct{})
	go func() { // owned by the cleanup below, which waits for done
		defer close(done)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(p.lines)
				return
			}
			p.lines <- line
		}
	}()
	t.Cleanup(func() {
		in.Close()
		c.Process.Kill()
		for range p.lines { // drain, so the reader can end
		}
		<-done
		c.Wait()
	})
	return p
}

func (p *stdioPeer) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(p.in, line+"\n")
	require.NoError(t, err)
}

// call sends a request and reads until its answer: its result (or error
// object), and the methods of the server's own requests meanwhile, each
// answered with a refusal (elicitation: accepted, with a name).
func (p *stdioPeer) call(t *testing.T, method, params string) (json.RawMessage, []string) {
	t.Helper()
	p.next++
	id := fmt.Sprint(p.next)
	p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":`+params+`}`)
	var asked []string
	deadline := time.After(readyTimeout)
	for {
		var line string
		select {
		case l, ok := <-p.lines:
			require.True(t, ok, "the server ended before answering %s", method)
			line = l
		case <-deadline:
			t.Fatalf("the server did not answer %s within %v", method, readyTimeout)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &m), "%s", line)
		switch {
		case m.Method != "" && m.ID != nil:
			asked = append(asked, m.Method)
			answer := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"probe"}}`
			if m.Method == "elicitation/create" {
				answer = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"action":"accept","content":{"name":"probe"}}}`
			}
			p.send(t, answer)
		case string(m.ID) == id && m.Error != nil:
			return m.Error, asked
		case string(m.ID) == id:
			return m.Result, asked
		}
	}
}

// confLatencyCalls is how many tool calls each latency run makes.
const confLatencyCalls = 200

// confLatency is one latency run: a client of one era through mcpmux to a
// process opened in one era, calling a tool that answers at once.
type confLatency struct {
	clientEra, opened string
	connect           time.Duration
	p50, p95          time.Duration
}

func (l confLatency) String() string {
	return fmt.Sprintf("%s client, process opened %s: connect %v, tools/call p50 %v p95 %v (%d calls)",
		l.clientEra, l.opened, l.connect.Round(10*time.Microsecond), l.p50.Round(10*time.Microsecond), l.p95.Round(10*time.Microsecond), confLatencyCalls)
}

// measureConfLatency connects a go-sdk client to url (through mcpmux's HTTP
// front) as a legacy client (initialize, 2025-11-25) or a modern one
// (server/discover, 2026-07-28), checks that it got that era, and times
// confLatencyCalls sequential calls of test_simple_text.
func measureConfLatency(ctx context.Context, url string, modern bool) (confLatency, error) {
	l := confLatency{clientEra: "legacy"}
	opts := &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	if modern {
		l.clientEra, opts = "modern", nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "latency", Version: "1"}, nil)
	start := time.Now()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, opts)
	if err != nil {
		return l, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	l.connect = time.Since(start)
	if got := cs.InitializeResult().ProtocolVersion >= "2026-07-28"; got != modern {
		return l, fmt.Errorf("the %s client got protocol version %s", l.clientEra, cs.InitializeResult().ProtocolVersion)
	}
	took := make([]time.Duration, 0, confLatencyCalls)
	for range confLatencyCalls {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
		if err != nil {
			return l, fmt.Errorf("tools/call: %w", err)
		}
		if res.IsError {
			return l, fmt.Errorf("tools/call: the tool failed: %v", res.Content)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	l.p50, l.p95 = took[len(took)/2], took[len(took)*95/100]
	return l, nil
}
