package streamable

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/protocol"
)

// reply is the response of one POST of the 2026-07-28 binding. Its status
// waits for the first frame about the request: an error answer gets the
// status its code calls for (a missing client capability is a 400, an
// unknown method a 404) in a JSON body; a result goes as JSON when the
// client accepts it, else as one SSE event; a notification first (progress,
// a log message, a listen's acknowledgement) starts an SSE stream, as does
// the hold timer running out (start).
type reply struct {
	rw           http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	json, sse    bool            // what the client accepts
	stream       bool            // a subscriptions/listen: always SSE, open until the client leaves
	id           json.RawMessage // the request's

	mu       sync.Mutex
	started  bool          // the status went out
	ended    bool          // nothing more goes out; finished is closed
	finished chan struct{} // closed once the answer is complete, or the client cannot take more
}

func newReply(rw http.ResponseWriter, r *http.Request, writeTimeout time.Duration, id json.RawMessage, stream bool) *reply {
	return &reply{id: id,
		rw: rw, rc: http.NewResponseController(rw), writeTimeout: writeTimeout,
		json: Accepts(r, "application/json"), sse: Accepts(r, "text/event-stream"), stream: stream,
		finished: make(chan struct{}),
	}
}

// put places one frame the session sends: the request's own (its tag) on
// the response; anything else has no place on this binding and is dropped,
// but for a refusal of the whole session before anything went out (the
// server is full), which is the answer.
func (p *reply) put(f outbox.Frame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.ended:
	case f.Tag != oneShotTag:
		if f.Last && f.Data != nil && !p.started {
			p.writeJSON(http.StatusServiceUnavailable, f.Data)
		}
	case f.Data == nil: // the request was settled without an answer
		if f.Last {
			p.endLocked()
		}
	case !p.started && f.Last:
		p.answerLocked(f.Data)
	case !p.started && !p.sse:
		// A notification before the answer, to a client that takes
		// JSON only: it has no place to go.
	default:
		if p.event(f.Data) != nil || f.Last {
			p.endLocked()
		}
	}
}

// answerLocked writes the answer that came before anything else.
func (p *reply) answerLocked(data []byte) {
	status := statusOf(data)
	if status != http.StatusOK || (p.json && !p.stream) || !p.sse {
		p.writeJSON(status, data)
		return
	}
	p.event(data)
	p.endLocked()
}

// start sends the SSE headers if nothing went out yet and the client takes
// SSE: the hold timer ran out with the request still being served.
func (p *reply) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started && !p.ended && p.sse {
		if p.writeHeader() != nil {
			p.endLocked()
		}
	}
}

// keepalive writes an SSE comment on a stream that is open.
func (p *reply) keepalive() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started && !p.ended {
		if p.write([]byte(":\n\n")) != nil {
			p.endLocked()
		}
	}
}

// refuse answers with a refusal of mcpmux's own if nothing went out yet,
// and ends the response either way.
func (p *reply) refuse(status int, e *jsonrpc.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started && !p.ended {
		p.writeJSON(status, e.Response(p.id))
	}
	p.endLocked()
}

// writeJSON writes the whole response as one JSON body, and ends it.
func (p *reply) writeJSON(status int, data []byte) {
	h := p.rw.Header()
	h.Set("Content-Type", "application/json")
	p.started = true
	p.rc.SetWriteDeadline(time.Now().Add(p.writeTimeout))
	p.rw.WriteHeader(status)
	p.rw.Write(data)
	p.endLocked()
}

func (p *reply) writeHeader() error {
	h := p.rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	p.started = true
	p.rc.SetWriteDeadline(time.Now().Add(p.writeTimeout))
	p.rw.WriteHeader(http.StatusOK)
	return p.rc.Flush()
}

// event writes one SSE event, with no id: this binding has no resumption.
func (p *reply) event(data []byte) error {
	if !p.started {
		if err := p.writeHeader(); err != nil {
			return err
		}
	}
	p.rc.SetWriteDeadline(time.Now().Add(p.writeTimeout))
	if err := writeSSE(p.rw, "", data); err != nil {
		return err
	}
	return p.rc.Flush()
}

func (p *reply) write(b []byte) error {
	p.rc.SetWriteDeadline(time.Now().Add(p.writeTimeout))
	if _, err := p.rw.Write(b); err != nil {
		return err
	}
	return p.rc.Flush()
}

func (p *reply) endLocked() {
	if !p.ended {
		p.ended = true
		close(p.finished)
	}
}

// statusOf is the HTTP status of an answer that comes first: 200 for a
// result, and for an error the status the transport's specification gives
// its code (the request's own failures are 400, an unknown method 404);
// other errors are the request's answer, under 200.
func statusOf(data []byte) int {
	// data is a frame mcpmux sends, valid JSON: read in place.
	s, ok := jsonrpc.FindPath(data, "error", "code")
	if !ok {
		return http.StatusOK
	}
	code, err := strconv.Atoi(string(data[s.Start:s.End]))
	if err != nil {
		return http.StatusOK
	}
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams,
		protocol.CodeHeaderMismatch, protocol.CodeMissingCapability, protocol.CodeUnsupportedVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
