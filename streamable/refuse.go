package streamable

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// WriteError answers an HTTP request with status and e as a JSON-RPC error
// response to id (null when nil): how every refusal of the web listener is
// written, so that a client always gets a body it can parse.
func WriteError(rw http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	h := rw.Header()
	h.Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	rw.Write(e.Response(id))
}

// refusal is one refusal of the transport: its status and its error.
type refusal struct {
	status int
	id     json.RawMessage
	err    *jsonrpc.Error
}

func refused(status int, code int, reason, format string) *refusal {
	return &refusal{status: status, err: &jsonrpc.Error{Code: code, Message: format, Reason: reason}}
}

// Refusals of the 2025 binding that do not depend on the request.
var (
	errNoSessionID    = refused(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonNoSession, "missing Mcp-Session-Id: send initialize first")
	errNoSession      = refused(http.StatusNotFound, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonNoSession, "no such session: it ended, or never was; initialize again")
	errNotAcceptable  = refused(http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonInvalidRequest, "Accept must allow application/json and text/event-stream")
	errNotSSE         = refused(http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonInvalidRequest, "Accept must allow text/event-stream")
	errContentType    = refused(http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonInvalidRequest, "Content-Type must be application/json")
	errFull           = refused(http.StatusServiceUnavailable, jsonrpc.CodeInternalError, jsonrpc.ReasonTooManySessions, "the server has its maximum of sessions")
	errShuttingDown   = refused(http.StatusServiceUnavailable, jsonrpc.CodeInternalError, jsonrpc.ReasonShuttingDown, "mcpmux is shutting down")
	errHTTPFull       = refused(http.StatusServiceUnavailable, jsonrpc.CodeInternalError, jsonrpc.ReasonTooManySessions, "mcpmux has its maximum of HTTP sessions (max_http_sessions), each with a request in flight")
	errEventID        = refused(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonInvalidRequest, "Last-Event-ID is not one of this session's")
	errTooManyStreams = refused(http.StatusServiceUnavailable, jsonrpc.CodeInternalError, jsonrpc.ReasonTooManyStreams, "mcpmux has its maximum of long-lived streams (http_max_streams): listens, GET streams and WebSockets")
	errListenEnded    = refused(http.StatusServiceUnavailable, jsonrpc.CodeInternalError, jsonrpc.ReasonTooManyStreams, "this client opened more listens than http_max_listens: its oldest is ended")
	errMethod         = refused(http.StatusMethodNotAllowed, jsonrpc.CodeInvalidRequest, jsonrpc.ReasonInvalidRequest, "method not allowed: GET, POST or DELETE")
)

// refuse writes a refusal and logs it, what the client sent cut short.
func (h *Handler) refuse(rw http.ResponseWriter, r *http.Request, server string, f *refusal, args ...any) {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = Clip(s)
		}
	}
	h.log.Warn("refused a web request: "+f.err.Message, append([]any{"peer", r.RemoteAddr, "status", f.status, "server", Clip(server)}, args...)...)
	WriteError(rw, f.status, f.id, f.err.WithServer(server))
}

// clipBytes is how much of a value a client sent a log line shows.
const clipBytes = 128

// Clip cuts a value a client sent (a header, a path) to what a log line
// shows of it, saying how long it was.
func Clip(s string) string {
	if len(s) <= clipBytes {
		return s
	}
	cut := clipBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// Accepts reports whether r's Accept header admits media type typ
// ("text/event-stream"), wildcards included.
func Accepts(r *http.Request, typ string) bool {
	major, _, _ := strings.Cut(typ, "/")
	for _, h := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(h, ",") {
			mt, ok := mediaType(part)
			if !ok {
				continue
			}
			if mt == typ || mt == "*/*" || mt == major+"/*" {
				return true
			}
		}
	}
	return false
}

// mediaType is the media type of one member of an Accept header, lower
// case and without parameters; a bare type, the common case, is read
// without mime.ParseMediaType.
func mediaType(part string) (string, bool) {
	mt := strings.TrimSpace(part)
	if strings.ContainsAny(mt, "; \t") {
		var err error
		mt, _, err = mime.ParseMediaType(mt)
		return mt, err == nil
	}
	return strings.ToLower(mt), mt != ""
}
