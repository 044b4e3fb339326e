package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// runMainEnv turns the test binary into the demo server, for the tests that
// need a real process (exit codes, signals, the grandchild).
const runMainEnv = "DEMOSERVER_TEST_RUN_MAIN"

// waitTimeout bounds every wait in these tests; nothing should come close.
const waitTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main() // exits
	}
	testutil.Main(m)
}

// session is one in-process run of the server, driven over pipes.
type session struct {
	t      *testing.T
	stdin  *io.PipeWriter
	lines  chan []byte // stdout, one line at a time; closed after run returns
	stderr *testutil.Buffer
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
	code   int           // run's result, once done is closed
}

// startServer runs the server in-process with args. Cleanup stops it and
// waits for every goroutine it started.
func startServer(t *testing.T, args ...string) *session {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{
		t:      t,
		stdin:  inW,
		lines:  make(chan []byte, 1024),
		stderr: &testutil.Buffer{},
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go func() {
		s.code = run(ctx, args, inR, outW, s.stderr)
		outW.Close()
		close(s.done)
	}()

	stopReading := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(s.lines)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case s.lines <- bytes.TrimSuffix(line, []byte("\n")):
				case <-stopReading:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()

	t.Cleanup(func() {
		cancel()
		inW.Close()
		close(stopReading)
		outR.Close()
		for _, c := range []chan struct{}{s.done, readerDone} {
			select {
			case <-c:
			case <-time.After(waitTimeout):
				t.Errorf("server did not stop; stderr:\n%s", s.stderr)
				return
			}
		}
	})
	return s
}

// send writes one line to the server's stdin.
func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Fatalf("write stdin: %v", err)
	}
}

// sendf formats and sends one line.
func (s *session) sendf(format string, args ...any) {
	s.t.Helper()
	s.send(fmt.Sprintf(format, args...))
}

// next returns the next stdout line.
func (s *session) next() string {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("stdout closed; stderr:\n%s", s.stderr)
		}
		return string(line)
	case <-time.After(waitTimeout):
		s.t.Fatalf("no line on stdout after %v; stderr:\n%s", waitTimeout, s.stderr)
	}
	return ""
}

// expect reads the next line and checks that it is exactly want.
func (s *session) expect(want string) {
	s.t.Helper()
	if got := s.next(); got != want {
		s.t.Fatalf("stdout line:\n got %s\nwant %s", got, want)
	}
}

// call sends a request line and returns the next line, which must be its
// response.
func (s *session) call(id, method, params string) message {
	s.t.Helper()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q`, id, method)
	if params != "" {
		line += `,"params":` + params
	}
	s.send(line + "}")
	m := decode(s.t, s.next())
	if string(m.ID) != id || m.Method != "" {
		s.t.Fatalf("want the response to id %s, got %s", id, m.raw)
	}
	return m
}

// callTool calls a tool and returns its result, failing on a JSON-RPC error.
func (s *session) callTool(id, name, args string) toolResultJSON {
	s.t.Helper()
	m := s.call(id, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, name, args))
	if m.Error != nil {
		s.t.Fatalf("tools/call %s: error %+v", name, m.Error)
	}
	var r toolResultJSON
	if err := json.Unmarshal(m.Result, &r); err != nil {
		s.t.Fatalf("decode tool result %s: %v", m.Result, err)
	}
	return r
}

// stats calls the stats tool.
func (s *session) stats(id string) stats {
	s.t.Helper()
	r := s.callTool(id, "stats", `{}`)
	var st stats
	if err := json.Unmarshal(r.StructuredContent, &st); err != nil {
		s.t.Fatalf("decode stats %s: %v", r.StructuredContent, err)
	}
	if len(r.Content) != 1 || r.Content[0].Text != string(r.StructuredContent) {
		s.t.Errorf("stats text %+v differs from structuredContent %s", r.Content, r.StructuredContent)
	}
	return st
}

// closeStdin ends the server's input.
func (s *session) closeStdin() {
	s.stdin.Close()
}

// wait returns run's exit code.
func (s *session) wait() int {
	s.t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(waitTimeout):
		s.t.Fatalf("run did not return; stderr:\n%s", s.stderr)
	}
	return 0
}

// rest returns every stdout line still unread; call it after wait.
func (s *session) rest() []string {
	s.t.Helper()
	var out []string
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return out
			}
			out = append(out, string(line))
		case <-time.After(waitTimeout):
			s.t.Fatalf("stdout not closed")
		}
	}
}

// message is a decoded JSON-RPC message from the server.
type message struct {
	raw     string
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

func decode(t *testing.T, line string) message {
	t.Helper()
	m := message{raw: line}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("stdout line is not JSON: %q", line)
	}
	if m.JSONRPC != "2.0" {
		t.Fatalf("no jsonrpc 2.0 in %s", line)
	}
	return m
}

// toolResultJSON is a CallToolResult as a client decodes it.
type toolResultJSON struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func TestInitializeNegotiatesVersion(t *testing.T) {
	tests := []struct {
		params string
		want   string
	}{
		{`{"protocolVersion":"2024-11-05"}`, "2024-11-05"},
		{`{"protocolVersion":"2025-03-26"}`, "2025-03-26"},
		{`{"protocolVersion":"2025-06-18"}`, "2025-06-18"},
		{`{"protocolVersion":"2025-11-25"}`, "2025-11-25"},
		{`{"protocolVersion":"2026-07-28"}`, "2025-11-25"},
		{`{"protocolVersion":"1999-01-01"}`, "2025-11-25"},
		{`{}`, "2025-11-25"},
	}
	for _, tt := range tests {
		t.Run(tt.params, func(t *testing.T) {
			s := startServer(t)
			s.sendf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":%s}`, tt.params)
			s.expect(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"` + tt.want + `",` +
				`"capabilities":{"tools":{"listChanged":true},"logging":{},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true}},` +
				`"serverInfo":{"name":"mcpmux-demo","version":"0.1.0"}}}`)
		})
	}
}

func TestSecondInitializeIsRefused(t *testing.T) {
	s := startServer(t)
	if m := s.call(`1`, "initialize", `{"protocolVersion":"2025-11-25"}`); m.Error != nil {
		t.Fatalf("first initialize: %s", m.raw)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`)
	s.expect(`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"already initialized"}}`)
	if got := s.stats(`3`).Initialize; got != 2 {
		t.Errorf("stats initialize = %d, want 2", got)
	}
}

func TestToolsList(t *testing.T) {
	s := startServer(t)
	m := s.call(`"list"`, "tools/list", "")
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatalf("decode %s: %v", m.raw, err)
	}
	var names []string
	for _, tool := range r.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema.Type != "object" || tool.InputSchema.Properties == nil || tool.Description == "" {
			t.Errorf("tool %s: incomplete entry", tool.Name)
		}
	}
	want := []string{"echo", "add", "slow", "crash", "junk", "huge", "stderr", "stop_reading", "stats", "notify", "ask", "invalid", "roots"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("tool names = %v, want %v", names, want)
	}
}

func TestIDsComeBackByteExact(t *testing.T) {
	tests := []struct {
		name    string
		request string // a request line with the id written as in id
		id      string
	}{
		{"string", `{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, `"abc"`},
		{"escapes and HTML characters", `{"jsonrpc":"2.0","id":"\u00e9t\u00e9 <&> \"q\"","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, `"\u00e9t\u00e9 <&> \"q\""`},
		{"raw UTF-8", `{"jsonrpc":"2.0","id":"été","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, `"été"`},
		{"integer beyond float64", `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, `12345678901234567890123`},
		{"negative", `{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, `-7`},
		{"exponent", `{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, `1e2`},
		{"spaces around", `{ "jsonrpc" : "2.0" , "id" :  "sp"  , "method" : "tools/call" , "params" : {"name":"echo","arguments":{"text":"hi"}} }`, `"sp"`},
	}
	s := startServer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.t = t
			s.send(tt.request)
			s.expect(`{"jsonrpc":"2.0","id":` + tt.id + `,"result":{"content":[{"type":"text","text":"hi"}],"structuredContent":{"text":"hi"}}}`)
		})
	}
}

func TestEchoKeepsText(t *testing.T) {
	s := startServer(t)
	text := "a \"quoted\" <b> & é\n\u2028"
	args, _ := json.Marshal(map[string]string{"text": text})
	r := s.callTool(`1`, "echo", string(args))
	if len(r.Content) != 1 || r.Content[0].Type != "text" || r.Content[0].Text != text {
		t.Errorf("content = %+v, want one text item %q", r.Content, text)
	}
	var sc struct{ Text string }
	if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.Text != text {
		t.Errorf("structuredContent = %s, want text %q", r.StructuredContent, text)
	}
}

func TestAddAndToolErrors(t *testing.T) {
	s := startServer(t)
	if r := s.callTool(`1`, "add", `{"a":2,"b":0.5}`); r.IsError || r.Content[0].Text != "2.5" {
		t.Errorf("add 2+0.5 = %+v, want 2.5", r)
	}
	if r := s.callTool(`2`, "add", `{"a":2}`); !r.IsError {
		t.Errorf("add without b = %+v, want isError", r)
	}
	if r := s.callTool(`3`, "slow", `{"ms":"x"}`); !r.IsError || !strings.HasPrefix(r.Content[0].Text, "slow: bad arguments: ") {
		t.Errorf("slow with a string ms = %+v, want isError", r)
	}
}

func TestSlowSendsProgress(t *testing.T) {
	for _, token := range []string{`"p-1"`, `42`, `"<é>"`} {
		t.Run(token, func(t *testing.T) {
			s := startServer(t)
			s.sendf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"ms":30,"steps":3},"_meta":{"progressToken":%s}}}`, token)
			for i := 1; i <= 3; i++ {
				s.expect(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":3}}`, token, i))
			}
			s.expect(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"waited 30 ms"}]}}`)
		})
	}
}

func TestSlowWithoutTokenSendsNoProgress(t *testing.T) {
	s := startServer(t)
	if r := s.callTool(`1`, "slow", `{"ms":10,"steps":3}`); r.IsError || r.Content[0].Text != "waited 10 ms" {
		t.Errorf("slow = %+v", r)
	}
}

func TestCancelStopsSlowWithoutAnswer(t *testing.T) {
	for _, id := range []string{`"s1"`, `9`} {
		t.Run(id, func(t *testing.T) {
			s := startServer(t)
			s.sendf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"slow","arguments":{"ms":600000}}}`, id)
			// Other requests are served while slow runs.
			if r := s.callTool(`"e"`, "echo", `{"text":"meanwhile"}`); r.Content[0].Text != "meanwhile" {
				t.Fatalf("echo during slow: %+v", r)
			}
			s.sendf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"test"}}`, id)

			var st stats
			n := 0
			testutil.Until(t, waitTimeout, "the cancellation to stop slow", func() bool {
				n++
				st = s.stats(fmt.Sprintf(`"stats-%d"`, n))
				return len(st.Aborted) > 0
			})
			want := []json.RawMessage{json.RawMessage(id)}
			if !reflect.DeepEqual(st.Aborted, want) || !reflect.DeepEqual(st.Cancelled, want) {
				t.Errorf("aborted = %s, cancelled = %s, want both [%s]", st.Aborted, st.Cancelled, id)
			}

			s.closeStdin()
			if code := s.wait(); code != 0 {
				t.Errorf("exit code %d, want 0", code)
			}
			for _, line := range s.rest() {
				if m := decode(t, line); string(m.ID) == id {
					t.Errorf("cancelled request was answered: %s", line)
				}
			}
		})
	}
}

func TestStatsCounts(t *testing.T) {
	s := startServer(t)
	s.call(`1`, "initialize", `{"protocolVersion":"2025-06-18"}`)
	s.call(`2`, "initialize", `{"protocolVersion":"2025-06-18"}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`)
	s.call(`3`, "tools/call", `{"name":"slow","arguments":{"ms":0},"_meta":{"progressToken":"tk"}}`)
	s.call(`4`, "ping", "")
	m := s.call(`5`, "tools/call", `{"name":"stats"}`)

	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dirJSON, _ := json.Marshal(dir)
	want := fmt.Sprintf(`{"initialize":2,"initialized":1,"cancelled":[99],"aborted":[],"requests":5,"answered":4,`+
		`"duplicateIds":0,"pid":%d,"dir":%s,"slowAtOnce":1,"grandchild":0,"progressTokens":["tk"],`+
		`"methods":["initialize","initialize","notifications/initialized","notifications/cancelled","tools/call","ping","tools/call"]}`, os.Getpid(), dirJSON)
	var r toolResultJSON
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	if string(r.StructuredContent) != want {
		t.Errorf("stats:\n got %s\nwant %s", r.StructuredContent, want)
	}
	if len(r.Content) != 1 || r.Content[0].Text != want {
		t.Errorf("stats text = %+v, want %s", r.Content, want)
	}
}

func TestStatsKeepsLastHundred(t *testing.T) {
	s := startServer(t)
	for i := range 120 {
		s.call(fmt.Sprint(i), "tools/call", fmt.Sprintf(`{"name":"slow","arguments":{"ms":0},"_meta":{"progressToken":%d}}`, i))
	}
	st := s.stats(`"st"`)
	if len(st.Methods) != historySize || st.Requests != 121 {
		t.Errorf("methods kept = %d, requests = %d; want %d and 121", len(st.Methods), st.Requests, historySize)
	}
	// The last 100 requests are 21..119 and the stats call itself.
	if len(st.ProgressTokens) != 99 || string(st.ProgressTokens[0]) != "21" || string(st.ProgressTokens[98]) != "119" {
		t.Errorf("progressTokens = %s, want 21..119", st.ProgressTokens)
	}
}

func TestDuplicateIDInFlight(t *testing.T) {
	s := startServer(t)
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{"ms":600000}}}`)
	s.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	s.expect(`{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"invalid request: id 5 is already in flight"}}`)
	if got := s.stats(`6`).DuplicateIDs; got != 1 {
		t.Errorf("duplicateIds = %d, want 1", got)
	}
}

func TestJunkLines(t *testing.T) {
	s := startServer(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"junk","arguments":{"lines":3}}}`)
	for i := 1; i <= 3; i++ {
		s.expect(fmt.Sprintf("this is not json %d", i))
	}
	s.expect(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"wrote 3 junk lines"}]}}`)

	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"junk"}}`)
	s.expect("this is not json 1")
	s.expect(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"wrote 1 junk lines"}]}}`)
}

func TestBanner(t *testing.T) {
	check := func(t *testing.T, s *session) {
		s.expect("mcpmux-demo banner line 1: this is not json")
		s.expect("mcpmux-demo banner line 2: this is not json")
		s.call(`1`, "ping", "")
	}
	t.Run("flag", func(t *testing.T) {
		check(t, startServer(t, "--banner", "2"))
	})
	t.Run("DEMO_MODE", func(t *testing.T) {
		t.Setenv(modeEnv, "banner=2")
		check(t, startServer(t))
	})
}

func TestBadInputIsAnswered(t *testing.T) {
	tests := []struct {
		name, line, want string // want "" means no answer at all
	}{
		{"not JSON", `this is not json`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: line is not valid JSON"}}`},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: line is not valid JSON"}}`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: expected a JSON object (batches are not supported)"}}`},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id must be a string or a number"}}`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id must be a string or a number"}}`},
		{"wrong version", `{"jsonrpc":"1.0","id":5,"method":"ping"}`, `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"invalid request: jsonrpc must be \"2.0\""}}`},
		{"no method", `{"jsonrpc":"2.0","id":7}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"invalid request: no method"}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":6,"method":"no/such"}`, `{"jsonrpc":"2.0","id":6,"error":{"code":-32601,"message":"method not found: no/such"}}`},
		{"unknown tool", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nope"}}`, `{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"unknown tool: nope"}}`},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/whatever"}`, ""},
		{"malformed cancellation", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, ""},
		{"a response", `{"jsonrpc":"2.0","id":3,"result":{}}`, ""},
		{"an error response with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, ""},
		{"blank line", `   `, ""},
	}
	s := startServer(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.t = t
			s.send(tt.line)
			if tt.want != "" {
				s.expect(tt.want)
			}
			// The server is still there, and had nothing else to say.
			s.call(fmt.Sprintf(`"ping-%d"`, i), "ping", "")
		})
	}
}

func TestLineLengthLimit(t *testing.T) {
	const limit = 64
	s := startServer(t, "--max-line", fmt.Sprint(limit))
	ping := func(id int, length int, eol string) string {
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id)
		return line[:len(line)-1] + strings.Repeat(" ", length-len(line)) + "}" + eol
	}
	tooLong := fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"line longer than %d bytes"}}`, limit)

	s.send(ping(1, limit, ""))
	s.expect(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	s.send(ping(2, limit, "\r"))
	s.expect(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	s.send(ping(3, limit+1, ""))
	s.expect(tooLong)
	s.send(ping(4, 100_000, ""))
	s.expect(tooLong)
	s.send(ping(5, 40, ""))
	s.expect(`{"jsonrpc":"2.0","id":5,"result":{}}`)
}

func TestHuge(t *testing.T) {
	s := startServer(t)
	const n = 1 << 20
	r := s.callTool(`1`, "huge", fmt.Sprintf(`{"bytes":%d}`, n))
	if len(r.Content) != 1 || len(r.Content[0].Text) != n || strings.Trim(r.Content[0].Text, "x") != "" {
		t.Errorf("huge: got %d content items, want one of %d x's", len(r.Content), n)
	}
}

func TestNotify(t *testing.T) {
	s := startServer(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notify","arguments":{"method":"notifications/tools/list_changed"}}}`)
	s.expect(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	s.expect(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`)

	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notify","arguments":{"method":"notifications/message","params":{ "level" : "info", "data" : "<hi>" }}}}`)
	s.expect(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"<hi>"}}`)
	s.expect(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}}`)
}

func TestStderrTool(t *testing.T) {
	s := startServer(t)
	s.callTool(`1`, "stderr", `{"text":"hello from the tool"}`)
	if !strings.Contains(s.stderr.String(), "\nhello from the tool\n") {
		t.Errorf("stderr = %q, want the tool's line", s.stderr)
	}
}

func TestStderrNoise(t *testing.T) {
	s := startServer(t, "--stderr-noise")
	s.call(`"n1"`, "ping", "")
	if !strings.Contains(s.stderr.String(), `mcpmux-demo: request ping id "n1"`+"\n") {
		t.Errorf("stderr = %q, want a line for the request", s.stderr)
	}
}

func TestEOFAnswersQuickRequestsThenExits(t *testing.T) {
	s := startServer(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"last"}}}`)
	s.closeStdin()
	if code := s.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	want := []string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"last"}],"structuredContent":{"text":"last"}}}`}
	if got := s.rest(); !reflect.DeepEqual(got, want) {
		t.Errorf("stdout after EOF = %q, want %q", got, want)
	}
}

func TestUnterminatedLastLineIsServed(t *testing.T) {
	s := startServer(t)
	if _, err := io.WriteString(s.stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); err != nil {
		t.Fatal(err)
	}
	s.closeStdin()
	if code := s.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	want := []string{`{"jsonrpc":"2.0","id":1,"result":{}}`}
	if got := s.rest(); !reflect.DeepEqual(got, want) {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

func TestEOFStopsSlowWithoutAnswer(t *testing.T) {
	s := startServer(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":600000}}}`)
	s.call(`2`, "ping", "")
	s.closeStdin()
	if code := s.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if got := s.rest(); len(got) != 0 {
		t.Errorf("stdout after EOF = %q, want nothing", got)
	}
}

func TestCrashTool(t *testing.T) {
	tests := []struct {
		args string
		code int
	}{{`{"code":7}`, 7}, {`{}`, 3}}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			s := startServer(t)
			s.sendf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":%s}}`, tt.args)
			if code := s.wait(); code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if got := s.rest(); len(got) != 0 {
				t.Errorf("stdout after crash = %q, want nothing", got)
			}
			if want := fmt.Sprintf("crash tool: exiting with code %d\n", tt.code); !strings.Contains(s.stderr.String(), want) {
				t.Errorf("stderr = %q, want %q", s.stderr, want)
			}
		})
	}
}

func TestCrashAfter(t *testing.T) {
	s := startServer(t, "--crash-after", "2")
	s.call(`1`, "initialize", `{}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.call(`2`, "ping", "")
	if code := s.wait(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	s.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`) // still read, never answered
	s.closeStdin()
	if got := s.rest(); len(got) != 0 {
		t.Errorf("stdout after the crash = %q, want nothing", got)
	}
}

func TestIgnoreEOF(t *testing.T) {
	s := startServer(t, "--ignore-eof")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":20}}}`)
	s.closeStdin()
	testutil.Until(t, waitTimeout, "the server to see EOF", func() bool {
		return strings.Contains(s.stderr.String(), "--ignore-eof: staying up")
	})
	// A request in flight at EOF still finishes, and run keeps going.
	s.expect(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"waited 20 ms"}]}}`)
	select {
	case <-s.done:
		t.Fatalf("run returned %d after EOF despite --ignore-eof", s.code)
	default:
	}
	s.cancel()
	if code := s.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestCrashEndsIgnoreEOF(t *testing.T) {
	s := startServer(t, "--ignore-eof")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":600000}}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash","arguments":{"code":4}}}`)
	s.closeStdin()
	if code := s.wait(); code != 4 {
		t.Errorf("exit code %d, want 4", code)
	}
	if got := s.rest(); len(got) != 0 {
		t.Errorf("stdout = %q, want nothing", got)
	}
}

func TestNoRead(t *testing.T) {
	s := startServer(t, "--no-read")
	testutil.Until(t, waitTimeout, "the --no-read log line", func() bool {
		return strings.Contains(s.stderr.String(), "--no-read: not reading stdin")
	})
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(s.stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
		written <- err
	}()
	s.cancel()
	if code := s.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	s.closeStdin()
	if err := <-written; !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write to stdin = %v, want it never read (io.ErrClosedPipe)", err)
	}
	if got := s.rest(); len(got) != 0 {
		t.Errorf("stdout = %q, want nothing", got)
	}
}

func TestParseOptions(t *testing.T) {
	base := options{maxLine: defaultMaxLine}
	tests := []struct {
		name    string
		mode    string
		args    []string
		want    options
		wantErr bool
	}{
		{"nothing", "", nil, base, false},
		{"flags", "", []string{"--banner", "2", "-no-read", "--stderr-noise", "--crash-after=4", "--max-line", "10"},
			options{banner: 2, noRead: true, stderrNoise: true, crashAfter: 4, maxLine: 10}, false},
		{"DEMO_MODE words", " ignore-eof, --ignore-sigterm ,grandchild,crash-after=2,", nil,
			options{ignoreEOF: true, ignoreSigterm: true, grandchild: true, crashAfter: 2, maxLine: defaultMaxLine}, false},
		{"command line wins", "banner=3", []string{"--banner", "1"}, options{banner: 1, maxLine: defaultMaxLine}, false},
		{"unknown word", "bogus", nil, options{}, true},
		{"unknown flag", "", []string{"--bogus"}, options{}, true},
		{"negative banner", "", []string{"--banner=-1"}, options{}, true},
		{"stray argument", "", []string{"extra"}, options{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOptions(tt.args, tt.mode, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseOptions(%q, %q) error = %v, wantErr %v", tt.args, tt.mode, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("parseOptions(%q, %q) = %+v, want %+v", tt.args, tt.mode, got, tt.want)
			}
		})
	}
}

func TestBadOptionsExitTwo(t *testing.T) {
	var stderr testutil.Buffer
	if code := run(context.Background(), []string{"--bogus"}, strings.NewReader(""), io.Discard, &stderr); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
}
