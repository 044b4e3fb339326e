package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// protocolVersions are the MCP revisions the server agrees to speak. Any
// other requested version gets latestVersion.
var protocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

const latestVersion = "2025-11-25"

// capabilities is the server's fixed answer to initialize.
const capabilities = `{"tools":{"listChanged":true},"logging":{},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true}}`

// handleRequest produces the result of one request, a *rpcError, or
// errNoResponse.
func (s *server) handleRequest(req *request) (any, error) {
	switch req.method {
	case "initialize":
		return s.initialize(req)
	case "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		return struct{}{}, nil
	case "tools/list":
		return map[string]any{"tools": toolList()}, nil
	case "tools/call":
		return s.callTool(req)
	case "resources/list":
		return map[string]any{"resources": []any{}}, nil
	case "resources/templates/list":
		return map[string]any{"resourceTemplates": []any{}}, nil
	case "resources/read":
		return nil, &rpcError{Code: codeNotFound, Message: "resource not found"}
	case "prompts/list":
		return map[string]any{"prompts": []any{}}, nil
	case "prompts/get":
		return nil, &rpcError{Code: codeInvalidParams, Message: "unknown prompt"}
	}
	return nil, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + req.method}
}

// initialize answers the handshake once per run.
func (s *server) initialize(req *request) (any, error) {
	if !req.first {
		return nil, &rpcError{Code: codeInvalidRequest, Message: "already initialized"}
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(req.params, &p) // missing or odd params just get the latest version
	if s.opts.strictCaps {
		if err := strictCapabilities(p.Capabilities); err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Unrecognized field in ClientCapabilities: " + err.Error()}
		}
	}
	version := latestVersion
	for _, v := range protocolVersions {
		if v == p.ProtocolVersion {
			version = v
		}
	}
	return struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      implementation  `json:"serverInfo"`
	}{version, json.RawMessage(capabilities), implementation{"mcpmux-demo", "0.1.0"}}, nil
}

// strictCapabilities decodes a client's capabilities as a server that
// knows only the 2024 shapes and refuses the rest (the Java SDK's Jackson
// mapping) does.
func strictCapabilities(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var caps struct {
		Experimental map[string]any `json:"experimental"`
		Roots        *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"roots"`
		Sampling    *struct{} `json:"sampling"`
		Elicitation *struct{} `json:"elicitation"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(&caps)
}

type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// tool is one entry of tools/list and its implementation. call decodes its
// own arguments; an error it returns that is neither a *rpcError nor
// errNoResponse becomes a tool result with isError set.
type tool struct {
	name        string
	description string
	schema      map[string]any
	call        func(s *server, req *request, args json.RawMessage) (*toolResult, error)
}

// toolResult is a CallToolResult.
type toolResult struct {
	Content           []textContent `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func textResult(text string) *toolResult {
	return &toolResult{Content: []textContent{{Type: "text", Text: text}}}
}

// listedTool is one entry of the tools/list answer.
type listedTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

// toolList is the tools/list answer, in a fixed order.
func toolList() []listedTool {
	var list []listedTool
	for _, t := range tools() {
		list = append(list, listedTool{t.name, t.description, t.schema})
	}
	return list
}

// tools is the server's tool table.
func tools() []tool {
	return []tool{
		{"echo", "Returns its text argument, also as structuredContent.",
			schema([]string{"text"}, property{"text", "string", "text to return"}), toolEcho},
		{"add", "Returns the sum of two numbers as text.",
			schema([]string{"a", "b"}, property{"a", "number", "first addend"}, property{"b", "number", "second addend"}), toolAdd},
		{"slow", "Waits ms milliseconds, sending steps progress notifications on the way when the request has a progress token. Stops without answering when cancelled.",
			schema([]string{"ms"}, property{"ms", "integer", "total wait in milliseconds"}, property{"steps", "integer", "progress notifications to send (default 0)"}), toolSlow},
		{"crash", "Writes a line to stderr and exits at once with the given code, without answering.",
			schema(nil, property{"code", "integer", "exit code (default 3)"}), toolCrash},
		{"junk", "Writes lines of non-JSON text to stdout, then answers normally.",
			schema(nil, property{"lines", "integer", "how many junk lines (default 1)"}), toolJunk},
		{"huge", "Returns a text result of the given number of 'x' bytes.",
			schema([]string{"bytes"}, property{"bytes", "integer", "length of the text"}), toolHuge},
		{"stderr", "Writes text to stderr and answers ok.",
			schema([]string{"text"}, property{"text", "string", "text for stderr"}), toolStderr},
		{"stop_reading", "Answers ok, then never reads stdin again (a hung server).",
			schema(nil), toolStopReading},
		{"stats", "Reports what the server has received so far.",
			schema(nil), toolStats},
		{"notify", "Sends the given notification to the client, then answers ok.",
			schema([]string{"method"}, property{"method", "string", "notification method, e.g. notifications/tools/list_changed"},
				property{"params", "object", "notification params"}), toolNotify},
		{"ask", "Asks the client for a sampling (sampling/createMessage) and answers with the text it got, or with the client's error.",
			schema(nil, property{"text", "string", "the message to sample on"}), toolAsk},
		{"invalid", "Answers with a line that is not valid JSON-RPC but whose id is readable: a NaN (kind nan, the default, as Python's json writes one) or a Latin-1 byte in a string (kind latin1).",
			schema(nil, property{"kind", "string", "nan or latin1"}, property{"bytes", "integer", "bytes of padding before the fault"}), toolInvalid},
		{"roots", "Asks the client for its roots (roots/list) and answers with their URIs, one a line.",
			schema(nil), toolRoots},
	}
}

// property is one property of a tool's input schema.
type property struct {
	name, typ, description string
}

// schema builds a JSON Schema for an object with the given properties.
func schema(required []string, props ...property) map[string]any {
	properties := map[string]any{}
	for _, p := range props {
		properties[p.name] = map[string]string{"type": p.typ, "description": p.description}
	}
	out := map[string]any{"type": "object", "properties": properties}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// callTool runs tools/call.
func (s *server) callTool(req *request) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(req.params, &p); err != nil || p.Name == "" {
		return nil, &rpcError{Code: codeInvalidParams, Message: "tools/call needs params with a name"}
	}
	for _, t := range tools() {
		if t.name != p.Name {
			continue
		}
		result, err := t.call(s, req, p.Arguments)
		var rerr *rpcError
		if err != nil && !errors.Is(err, errNoResponse) && !errors.As(err, &rerr) {
			result, err = textResult(p.Name+": "+err.Error()), nil
			result.IsError = true
		}
		return result, err
	}
	return nil, &rpcError{Code: codeInvalidParams, Message: "unknown tool: " + p.Name}
}

// decodeArgs decodes tool arguments into v; absent arguments are {}.
func decodeArgs(raw json.RawMessage, v any) error {
	if isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("bad arguments: %w", err)
	}
	return nil
}

func toolEcho(_ *server, _ *request, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Text *string `json:"text"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.Text == nil {
		return nil, errors.New("text is required")
	}
	r := textResult(*a.Text)
	r.StructuredContent = map[string]string{"text": *a.Text}
	return r, nil
}

func toolAdd(_ *server, _ *request, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		A *float64 `json:"a"`
		B *float64 `json:"b"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.A == nil || a.B == nil {
		return nil, errors.New("a and b are required")
	}
	return textResult(strconv.FormatFloat(*a.A+*a.B, 'g', -1, 64)), nil
}

// toolSlow waits, sending progress i of steps at i/steps of the wait. It
// returns errNoResponse as soon as the request is cancelled (or stdin closes).
func toolSlow(s *server, req *request, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		MS    *int `json:"ms"`
		Steps int  `json:"steps"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.MS == nil || *a.MS < 0 || a.Steps < 0 {
		return nil, errors.New("ms is required; ms and steps must not be negative")
	}
	total := time.Duration(*a.MS) * time.Millisecond
	start := time.Now()
	now := s.slowNow.Add(1)
	defer s.slowNow.Add(-1)
	for most := s.slowMost.Load(); now > most && !s.slowMost.CompareAndSwap(most, now); most = s.slowMost.Load() {
	}
	for i := 1; i <= a.Steps; i++ {
		if !sleepUntil(req.ctx, start.Add(total*time.Duration(i)/time.Duration(a.Steps))) {
			return nil, s.stopped(req)
		}
		if req.progressToken != nil {
			err := s.notify("notifications/progress", struct {
				ProgressToken json.RawMessage `json:"progressToken"`
				Progress      int             `json:"progress"`
				Total         int             `json:"total"`
			}{req.progressToken, i, a.Steps})
			if err != nil {
				return nil, err
			}
		}
	}
	if !sleepUntil(req.ctx, start.Add(total)) {
		return nil, s.stopped(req)
	}
	return textResult(fmt.Sprintf("waited %d ms", *a.MS)), nil
}

// sleepUntil waits for the deadline and reports false if ctx ends first.
func sleepUntil(ctx context.Context, deadline time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	d := time.Until(deadline)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func toolCrash(s *server, _ *request, raw json.RawMessage) (*toolResult, error) {
	a := struct {
		Code int `json:"code"`
	}{Code: 3}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	s.logf("crash tool: exiting with code %d", a.Code)
	s.exit(a.Code)
	return nil, errNoResponse
}

func toolJunk(s *server, _ *request, raw json.RawMessage) (*toolResult, error) {
	a := struct {
		Lines int `json:"lines"`
	}{Lines: 1}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	for i := 1; i <= a.Lines; i++ {
		s.writeLine(fmt.Appendf(nil, "this is not json %d", i), false)
	}
	return textResult(fmt.Sprintf("wrote %d junk lines", max(a.Lines, 0))), nil
}

func toolHuge(_ *server, _ *request, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Bytes *int `json:"bytes"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.Bytes == nil || *a.Bytes < 0 {
		return nil, errors.New("bytes is required and must not be negative")
	}
	return textResult(strings.Repeat("x", *a.Bytes)), nil
}

func toolStderr(s *server, _ *request, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Text *string `json:"text"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.Text == nil {
		return nil, errors.New("text is required")
	}
	s.stderr.line(*a.Text)
	return textResult("ok"), nil
}

func toolNotify(s *server, _ *request, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.Method == "" {
		return nil, errors.New("method is required")
	}
	var params any
	if !isNull(a.Params) {
		params = a.Params
	}
	if err := s.notify(a.Method, params); err != nil {
		return nil, err
	}
	return textResult("ok"), nil
}

// stats is the stats tool's report.
type stats struct {
	Initialize     int               `json:"initialize"`     // initialize requests received
	Initialized    int               `json:"initialized"`    // notifications/initialized received
	Cancelled      []json.RawMessage `json:"cancelled"`      // requestId of each notifications/cancelled, as received
	Aborted        []json.RawMessage `json:"aborted"`        // ids of requests a cancellation actually stopped
	Requests       int               `json:"requests"`       // requests received, this one included
	Answered       int               `json:"answered"`       // responses written so far
	DuplicateIDs   int               `json:"duplicateIds"`   // requests whose id was already in flight
	PID            int               `json:"pid"`            // this process
	Dir            string            `json:"dir"`            // its working folder
	SlowAtOnce     int               `json:"slowAtOnce"`     // the most slow calls that ran at the same time
	Grandchild     int               `json:"grandchild"`     // the --grandchild pid, or 0
	ProgressTokens []json.RawMessage `json:"progressTokens"` // tokens of the last 100 requests that had one
	Methods        []string          `json:"methods"`        // last 100 methods received, oldest first
}

func toolStats(s *server, _ *request, _ json.RawMessage) (*toolResult, error) {
	st := stats{PID: os.Getpid(), Grandchild: s.grandchild, ProgressTokens: []json.RawMessage{}}
	st.Dir, _ = os.Getwd()
	st.SlowAtOnce = int(s.slowMost.Load())
	s.mu.Lock()
	st.Initialize, st.Initialized, st.Requests, st.DuplicateIDs = s.initializes, s.initialized, s.requests, s.duplicates
	st.Cancelled = append([]json.RawMessage{}, s.cancelled...)
	st.Aborted = append([]json.RawMessage{}, s.aborted...)
	st.Methods = append([]string{}, s.methods...)
	for _, tok := range s.progressTokens {
		if tok != nil {
			st.ProgressTokens = append(st.ProgressTokens, tok)
		}
	}
	s.mu.Unlock()
	st.Answered = int(s.answered.Load())

	text, err := marshal(st)
	if err != nil {
		return nil, err
	}
	r := textResult(string(text))
	r.StructuredContent = json.RawMessage(text)
	return r, nil
}

// toolStopReading answers, then makes the read loop block for good before
// its next line: the server stays up but accepts no more input.
// toolInvalid writes its own answer, broken on purpose.
func toolInvalid(s *server, req *request, raw json.RawMessage) (*toolResult, error) {
	a := struct {
		Kind  string `json:"kind"`
		Bytes int    `json:"bytes"`
	}{Kind: "nan"}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	// The padding comes first, so that a long answer is broken only near
	// its end.
	pad := strings.Repeat("x", max(a.Bytes, 0))
	body := `{"content":[{"type":"text","text":"` + pad + `score"}],"structuredContent":{"score":NaN}}`
	if a.Kind == "latin1" {
		body = "{\"content\":[{\"type\":\"text\",\"text\":\"" + pad + "caf\xe9\"}]}"
	}
	s.writeLine(envelope(req.id, "result", []byte(body)), true)
	return nil, errNoResponse
}

func toolStopReading(s *server, _ *request, _ json.RawMessage) (*toolResult, error) {
	s.stopReading.Store(true)
	return textResult("ok"), nil
}

// toolAsk sends sampling/createMessage to the client under an id of the
// server's own and waits for the answer, or for the request's end.
func toolAsk(s *server, req *request, raw json.RawMessage) (*toolResult, error) {
	var a struct {
		Text string `json:"text"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	params := map[string]any{
		"messages":  []any{map[string]any{"role": "user", "content": map[string]string{"type": "text", "text": a.Text}}},
		"maxTokens": 16,
	}
	var r struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := s.askClient(req, "sampling/createMessage", params, &r); err != nil {
		return nil, err
	}
	return textResult(r.Content.Text), nil
}

// toolRoots asks the client for its roots and answers with their URIs, one
// a line.
func toolRoots(s *server, req *request, _ json.RawMessage) (*toolResult, error) {
	var r struct {
		Roots []struct {
			URI string `json:"uri"`
		} `json:"roots"`
	}
	if err := s.askClient(req, "roots/list", map[string]any{}, &r); err != nil {
		return nil, err
	}
	uris := make([]string, len(r.Roots))
	for i, root := range r.Roots {
		uris[i] = root.URI
	}
	return textResult(strings.Join(uris, "\n")), nil
}

// askClient sends the client a request and decodes its result into
// result; errNoResponse when req is cancelled first.
func (s *server) askClient(req *request, method string, params any, result any) error {
	answer := make(chan json.RawMessage, 1)
	s.mu.Lock()
	if s.asks == nil {
		s.asks = make(map[string]chan json.RawMessage)
	}
	s.nextAsk++
	id := json.RawMessage(strconv.Quote("ask-" + strconv.Itoa(s.nextAsk)))
	s.asks[string(id)] = answer
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.asks, string(id))
	}()
	line, err := marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  any             `json:"params"`
	}{"2.0", id, method, params})
	if err != nil {
		return err
	}
	s.writeLine(line, false)
	select {
	case m := <-answer:
		var r struct {
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(m, &r); err != nil || r.Result == nil {
			if r.Error != nil {
				return fmt.Errorf("the client answered %d: %s", r.Error.Code, r.Error.Message)
			}
			return errors.New("the client's answer has no result")
		}
		return json.Unmarshal(r.Result, result)
	case <-req.ctx.Done():
		return errNoResponse
	}
}

// answeredAsk hands the client's answer line to the ask waiting under id;
// false when none waits.
func (s *server) answeredAsk(id json.RawMessage, line []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	answer, ok := s.asks[compactKey(id)]
	if ok {
		delete(s.asks, compactKey(id))
		answer <- line
	}
	return ok
}
