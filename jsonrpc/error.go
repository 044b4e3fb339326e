package jsonrpc

import (
	"encoding/json"
	"fmt"
)

// JSON-RPC and MCP error codes that mcpmux emits.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Reasons: the data.reason of every error mcpmux emits. Tests outside this
// repository match on them.
const (
	ReasonParseError          = "parse_error"
	ReasonInvalidRequest      = "invalid_request"
	ReasonTooLarge            = "message_too_large"
	ReasonDuplicateID         = "duplicate_id"
	ReasonNotInitialized      = "not_initialized"
	ReasonInternal            = "internal_error"
	ReasonUnknownTask         = "unknown_task"
	ReasonInvalidLevel        = "invalid_level"
	ReasonTooManySessions     = "too_many_sessions"
	ReasonBatchNotSupported   = "batch_not_supported"
	ReasonUpstreamExited      = "upstream_exited"
	ReasonUpstreamStalled     = "upstream_stalled"
	ReasonUpstreamUnavailable = "upstream_unavailable"
	ReasonTimeout             = "timeout"
	ReasonNotSupported        = "not_supported"
	ReasonMethodNotFound      = "method_not_found"
	ReasonNoClient            = "no_client"
	ReasonClientGone          = "client_gone"
	ReasonClientTimeout       = "client_timeout"
	ReasonUnsupportedVersion  = "unsupported_version"
	ReasonInvalidRequestState = "invalid_request_state"
	ReasonMissingCapability   = "missing_capability"
	ReasonInvalidAnswer       = "invalid_answer"
	ReasonDaemonGone          = "daemon_gone"      // written by `mcpmux connect`: its session with the daemon ended with the request in flight
	ReasonUnknownTool         = "unknown_tool"     // a tool no server of an endpoint has by that name, or one its view hides
	ReasonUnknownPrompt       = "unknown_prompt"   // a prompt no server of an endpoint has by that name
	ReasonUnknownResource     = "unknown_resource" // a resource URI no server of an endpoint listed

	// Refusals of the web listener, each with its HTTP status.
	ReasonForbidden      = "forbidden"        // 403: Host or Origin not allowed
	ReasonUnauthorized   = "unauthorized"     // 401: no token, or a wrong one
	ReasonNoSuchServer   = "no_such_server"   // 404: no server of that name
	ReasonNoSession      = "no_session"       // 400 without Mcp-Session-Id, 404 for one that ended or never was
	ReasonShuttingDown   = "shutting_down"    // 503: the daemon is stopping
	ReasonTooManyStreams = "too_many_streams" // 503: the web listener has its maximum of long-lived streams, or the client of listens
	ReasonHeaderMismatch = "header_mismatch"  // 400: an HTTP header contradicts the body
)

// Error is a JSON-RPC error that mcpmux itself emits. On the wire its data is
// an object with "reason", "server" and any Extra members.
type Error struct {
	Code    int
	Message string
	Reason  string
	Server  string
	Extra   map[string]any
}

func (e *Error) Error() string {
	if e.Server != "" {
		return fmt.Sprintf("%s: %s (%d %s)", e.Server, e.Message, e.Code, e.Reason)
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Code, e.Reason)
}

// Is reports whether target is an *Error with the same code and reason, so
// that callers can test errors.Is(err, &jsonrpc.Error{Code: ..., Reason: ...}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Reason == e.Reason
}

// WithServer returns a copy of e naming the server.
func (e *Error) WithServer(server string) *Error {
	c := *e
	c.Server = server
	return &c
}

// wireError is the error object as it goes on the wire.
type wireError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// Response encodes e as an error response to id; a nil id is written as null.
func (e *Error) Response(id json.RawMessage) []byte {
	data := make(map[string]any, 2+len(e.Extra))
	for k, v := range e.Extra {
		data[k] = v
	}
	data["reason"] = e.Reason
	data["server"] = e.Server
	body, err := json.Marshal(wireError{e.Code, e.Message, data})
	if err != nil { // an unencodable Extra is our bug; still answer
		body, _ = json.Marshal(wireError{e.Code, e.Message, map[string]any{"reason": e.Reason, "server": e.Server}})
	}
	return envelope(id, "error", body)
}

// Response encodes a result response.
func Response(id, result json.RawMessage) []byte {
	if len(result) == 0 { // as encoding/json writes a nil RawMessage
		result = json.RawMessage("null")
	}
	return envelope(id, "result", result)
}

func envelope(id json.RawMessage, member string, body []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	out := make([]byte, 0, len(id)+len(body)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"`...)
	out = append(out, member...)
	out = append(out, `":`...)
	out = append(out, body...)
	return append(out, '}')
}

// Request encodes a request; params may be nil.
func Request(id json.RawMessage, method string, params any) ([]byte, error) {
	return encode(id, method, params)
}

// Notification encodes a notification; params may be nil.
func Notification(method string, params any) ([]byte, error) {
	return encode(nil, method, params)
}

type wireCall struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  any             `json:"params,omitempty"`
}

func encode(id json.RawMessage, method string, params any) ([]byte, error) {
	b, err := json.Marshal(wireCall{"2.0", id, method, params})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", method, err)
	}
	return b, nil
}
