package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// client is one raw connection to a server's socket: newline-delimited
// JSON-RPC, written and read by hand. Its methods return errors rather than
// failing the test, so that goroutines may use them; the test goroutine
// checks what they return.
type client struct {
	conn  net.Conn
	r     *jsonrpc.Reader
	calls atomic.Int64 // for the ids of the helpers' own requests
}

// readLimit bounds one frame the tests read: bigger than any answer they
// ask for.
const readLimit = 64 << 20

func dialSocket(path string) (*client, error) {
	conn, err := net.DialTimeout("unix", path, ioTimeout)
	if err != nil {
		return nil, err
	}
	return &client{conn: conn, r: jsonrpc.NewReader(conn, readLimit)}, nil
}

// dial connects to a server's socket; the connection is closed at cleanup.
func dial(tb testing.TB, path string) *client {
	tb.Helper()
	c, err := dialSocket(path)
	require.NoError(tb, err, "dial %s", path)
	tb.Cleanup(func() { c.close() })
	return c
}

func (c *client) close() error { return c.conn.Close() }

// send writes each frame followed by a newline, in one write.
func (c *client) send(frames ...[]byte) error {
	var b []byte
	for _, f := range frames {
		b = append(append(b, f...), '\n')
	}
	return c.sendRaw(b)
}

// sendRaw writes b exactly as it is.
func (c *client) sendRaw(b []byte) error {
	c.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err := c.conn.Write(b)
	return err
}

// readFrame reads the next line.
func (c *client) readFrame() ([]byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	return c.r.Read()
}

// read reads the next line, which must be a valid JSON-RPC message.
func (c *client) read() (*jsonrpc.Message, error) {
	frame, err := c.readFrame()
	if err != nil {
		return nil, err
	}
	m, err := jsonrpc.Parse(frame)
	if err != nil {
		return nil, fmt.Errorf("the daemon sent an invalid message %.200q: %w", frame, err)
	}
	return m, nil
}

// await reads until the response whose id is exactly id (raw JSON) and
// returns it with everything read before it.
func (c *client) await(id string) (answer *jsonrpc.Message, before []*jsonrpc.Message, err error) {
	for {
		m, err := c.read()
		if err != nil {
			return nil, before, fmt.Errorf("waiting for the answer to %s: %w", id, err)
		}
		if (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && string(m.ID) == id {
			return m, before, nil
		}
		before = append(before, m)
	}
}

// call sends a request and returns its answer, skipping notifications.
func (c *client) call(id, method string, params any) (*jsonrpc.Message, error) {
	if err := c.send(request(id, method, params)); err != nil {
		return nil, err
	}
	m, _, err := c.await(id)
	return m, err
}

// tool calls a tool under id and returns the answer.
func (c *client) tool(id, name string, args any) (*jsonrpc.Message, error) {
	return c.call(id, "tools/call", toolParams(name, args))
}

// initialize opens the session with the given protocol version and sends
// notifications/initialized; it returns the InitializeResult's answer.
func (c *client) initialize(version string) (*jsonrpc.Message, error) {
	m, err := c.call(`"init"`, "initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "integration", "version": "1"},
	})
	if err != nil {
		return nil, err
	}
	if m.Kind != jsonrpc.KindResult {
		return m, fmt.Errorf("initialize failed: %s", m.Frame)
	}
	return m, c.send(notification("notifications/initialized", nil))
}

// stats calls the demo server's stats tool.
func (c *client) stats() (demoStats, error) {
	id := strconv.Quote("stats-" + strconv.FormatInt(c.calls.Add(1), 10))
	m, err := c.tool(id, "stats", nil)
	if err != nil {
		return demoStats{}, err
	}
	var st demoStats
	if err := decodeStructured(m, &st); err != nil {
		return demoStats{}, err
	}
	return st, nil
}

// echo calls the echo tool and checks that text came back.
func (c *client) echo(id, text string) error {
	m, err := c.tool(id, "echo", map[string]string{"text": text})
	if err != nil {
		return err
	}
	got, err := resultText(m)
	if err != nil {
		return err
	}
	if got != text {
		return fmt.Errorf("echo %q came back as %q", text, got)
	}
	return nil
}

// open dials a socket and initializes a session, failing the test on error.
func open(tb testing.TB, path string) *client {
	tb.Helper()
	c := dial(tb, path)
	_, err := c.initialize("2025-06-18")
	require.NoError(tb, err, "initialize over %s", path)
	return c
}

// mustStats is stats for the test goroutine.
func (c *client) mustStats(tb testing.TB) demoStats {
	tb.Helper()
	st, err := c.stats()
	require.NoError(tb, err, "stats")
	return st
}

// demoStats is the demo server's stats report.
type demoStats struct {
	Initialize     int               `json:"initialize"`
	Initialized    int               `json:"initialized"`
	Cancelled      []json.RawMessage `json:"cancelled"`
	Aborted        []json.RawMessage `json:"aborted"`
	Requests       int               `json:"requests"`
	Answered       int               `json:"answered"`
	DuplicateIDs   int               `json:"duplicateIds"`
	PID            int               `json:"pid"`
	Dir            string            `json:"dir"`
	SlowAtOnce     int               `json:"slowAtOnce"`
	ProgressTokens []json.RawMessage `json:"progressTokens"`
	Methods        []string          `json:"methods"`
}

// request builds a request frame by hand, so that id (raw JSON) reaches the
// wire byte for byte; params is marshalled unless it is already raw.
func request(id, method string, params any) []byte {
	b := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%q`, id, method)
	return appendParams(b, params)
}

func notification(method string, params any) []byte {
	b := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%q`, method)
	return appendParams(b, params)
}

func appendParams(b []byte, params any) []byte {
	if params != nil {
		raw, ok := params.(json.RawMessage)
		if !ok {
			var err error
			if raw, err = json.Marshal(params); err != nil {
				panic(err) // the tests' own values always encode
			}
		}
		b = append(append(b, `,"params":`...), raw...)
	}
	return append(b, '}')
}

// toolParams are the params of a tools/call.
func toolParams(name string, args any) map[string]any {
	p := map[string]any{"name": name}
	if args != nil {
		p["arguments"] = args
	}
	return p
}

// toolCall is a tools/call request frame.
func toolCall(id, name string, args any) []byte {
	return request(id, "tools/call", toolParams(name, args))
}

// toolResult is a CallToolResult.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func decodeResult(m *jsonrpc.Message) (toolResult, error) {
	var r toolResult
	if m.Kind != jsonrpc.KindResult {
		return r, fmt.Errorf("want a result, got %s", m.Frame)
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		return r, fmt.Errorf("decode result %s: %w", m.Result, err)
	}
	if r.IsError {
		return r, fmt.Errorf("tool failed: %s", m.Result)
	}
	return r, nil
}

// resultText is the text of a tool result's first content item.
func resultText(m *jsonrpc.Message) (string, error) {
	r, err := decodeResult(m)
	if err != nil {
		return "", err
	}
	if len(r.Content) == 0 {
		return "", errors.New("tool result has no content")
	}
	return r.Content[0].Text, nil
}

func decodeStructured(m *jsonrpc.Message, v any) error {
	r, err := decodeResult(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(r.StructuredContent, v)
}

// rpcError is an error response as mcpmux writes it.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Reason string `json:"reason"`
		Server string `json:"server"`
	} `json:"data"`
}

func errorOf(m *jsonrpc.Message) (rpcError, error) {
	var e rpcError
	if m.Kind != jsonrpc.KindError {
		return e, fmt.Errorf("want an error, got %s", m.Frame)
	}
	if err := json.Unmarshal(m.Error, &e); err != nil {
		return e, fmt.Errorf("decode error %s: %w", m.Error, err)
	}
	return e, nil
}

// progressToken returns a notifications/progress message's token, raw.
func progressToken(m *jsonrpc.Message) (string, bool) {
	if m.Kind != jsonrpc.KindNotification || m.Method != "notifications/progress" {
		return "", false
	}
	var p struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return "", false
	}
	return string(p.ProgressToken), true
}
