package mux

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// The bridge up: a legacy session's request to a modern server.

// retry is what a legacy session's request to a modern server keeps to be
// sent again with input.
type retry struct {
	frame  []byte // as last sent upstream
	rounds int
}

// round is one set of input requests put to a legacy session.
type round struct {
	c    *client
	r    idmap.Route
	old  int64 // the upstream id that answered input_required
	d    *routeData
	st   json.RawMessage // requestState, to send back as it came
	keys []string

	mu        sync.Mutex
	answers   map[string]json.RawMessage
	left      int
	failed    *jsonrpc.Error
	cancelled bool
}

// cancelBetweenRounds: the session cancelled a request while mcpmux was
// asking it for input; it gets no answer, and is not sent again.
func (b *upBridge) cancelBetweenRounds(c *client, id []byte) bool {
	h := b.h
	rd := h.flights.takeRound(c.sess.ID(), id)
	if rd == nil {
		return false
	}
	rd.cancel()
	c.settle(rd.r)
	return true
}

func (rd *round) cancel() {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	rd.cancelled = true
}

// inputRequired reports whether a modern server's answer is an
// input_required result, and decodes it.
func inputRequired(result json.RawMessage) (map[string]inputRequest, json.RawMessage, bool) {
	if len(result) == 0 || result[0] != '{' {
		return nil, nil, false
	}
	if rt, _ := jsonrpc.StringMember(result, "resultType"); rt != "input_required" {
		return nil, nil, false
	}
	var body struct {
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  json.RawMessage         `json:"requestState"`
	}
	if json.Unmarshal(result, &body) != nil {
		return nil, nil, false
	}
	return body.InputRequests, body.RequestState, true
}

type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// putToSession asks a legacy session for each input a modern server's
// answer asked for; the request goes upstream again once all are in.
func (b *upBridge) putToSession(c *client, r idmap.Route, up int64, inputs map[string]inputRequest, state json.RawMessage) {
	h := b.h
	d := dataOf(r)
	if d.retry.rounds++; d.retry.rounds > maxRounds {
		c.deliver(r, (&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server asked for input more than " + strconv.Itoa(maxRounds) + " times", Reason: jsonrpc.ReasonInternal}).WithServer(h.cfg.Name).Response(r.ID), nil)
		return
	}
	rd := &round{c: c, r: r, old: up, d: d, st: state, answers: map[string]json.RawMessage{}, left: len(inputs)}
	h.flights.addRound(rd)
	if len(inputs) == 0 {
		b.nextRound(rd)
		return
	}
	for key, in := range inputs {
		rd.keys = append(rd.keys, key)
		b.askFor(rd, key, in)
	}
}

// askFor puts one input request to the round's session.
func (b *upBridge) askFor(rd *round, key string, in inputRequest) {
	h := b.h
	c := rd.c
	switch in.Method {
	case "roots/list":
		if !h.cfg.RootsFromSessions || !c.capabilities().roots {
			list := []root{}
			for _, u := range h.cfg.Roots {
				list = append(list, root{URI: u})
			}
			body, _ := json.Marshal(map[string]any{"roots": list})
			b.inputAnswered(rd, key, body, nil)
			return
		}
	case "elicitation/create", "sampling/createMessage":
		probe := &jsonrpc.Message{Method: in.Method, Params: in.Params}
		if !c.capabilities().meets(needOf(probe)) {
			b.inputAnswered(rd, key, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server needs " + in.Method + ", which this session did not declare", Reason: jsonrpc.ReasonMissingCapability})
			return
		}
	default:
		b.inputAnswered(rd, key, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server asked for " + in.Method + ", which mcpmux cannot put to a session", Reason: jsonrpc.ReasonNotSupported})
		return
	}
	params := in.Params
	if params == nil {
		params = json.RawMessage(`{}`)
	}
	h.askSession(c, rd.r.Tag, in.Method, params, func(ans *jsonrpc.Message) {
		switch {
		case ans == nil:
			b.inputAnswered(rd, key, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the session did not answer " + in.Method, Reason: jsonrpc.ReasonClientTimeout})
		case ans.Kind == jsonrpc.KindError:
			b.inputAnswered(rd, key, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the session refused " + in.Method + ": " + string(ans.Error), Reason: jsonrpc.ReasonNoClient})
		default:
			b.inputAnswered(rd, key, ans.Result, nil)
		}
	})
}

// inputAnswered records one answer of a round; the last one sends the
// request on.
func (b *upBridge) inputAnswered(rd *round, key string, body json.RawMessage, failed *jsonrpc.Error) {
	if !rd.record(key, body, failed) {
		return
	}
	b.nextRound(rd)
}

// record notes an answer; true when it was the last one due.
func (rd *round) record(key string, body json.RawMessage, failed *jsonrpc.Error) bool {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if failed != nil && rd.failed == nil {
		rd.failed = failed
	}
	if body != nil {
		rd.answers[key] = body
	}
	rd.left--
	return rd.left == 0
}

func (rd *round) outcome() (cancelled bool, failed *jsonrpc.Error) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rd.cancelled, rd.failed
}

// nextRound sends a legacy session's request upstream again, under a new
// id, with the inputs its session gave.
func (b *upBridge) nextRound(rd *round) {
	h := b.h
	c, r, d := rd.c, rd.r, rd.d
	if h.flights.takeRound(r.Session, r.ID) == nil {
		return // cancelled, or the session left
	}
	if cancelled, failed := rd.outcome(); cancelled {
		return
	} else if failed != nil {
		c.deliver(r, failed.WithServer(h.cfg.Name).Response(r.ID), nil)
		return
	}
	proc := h.life.current()
	r.Started = time.Now()
	var up int64
	err := errGone
	if proc != nil {
		up, err = h.flights.round(r, d, rd.old)
	}
	if err != nil {
		c.deliver(r, (&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is gone", Reason: jsonrpc.ReasonUpstreamUnavailable}).WithServer(h.cfg.Name).Response(r.ID), nil)
		return
	}
	frame, err := retryFrame(d.retry.frame, up, r.Token != nil, rd.answers, rd.st)
	if err != nil {
		h.flights.take(up)
		c.deliver(r, (&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "cannot send the request again: " + err.Error(), Reason: jsonrpc.ReasonInternal}).WithServer(h.cfg.Name).Response(r.ID), nil)
		return
	}
	d.retry.frame = frame
	if err := proc.Send(frame); err != nil {
		if r, ok := h.flights.take(up); ok {
			h.fail(r, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server cannot take the request: " + err.Error(), Reason: jsonrpc.ReasonUpstreamUnavailable})
		}
	}
}

// errGone: there is no process to send the request to.
var errGone = errors.New("mux: the server is gone")

// retryFrame is the request as last sent, under id up, with the inputs and
// the server's requestState.
func retryFrame(prev []byte, up int64, hasToken bool, answers map[string]json.RawMessage, state json.RawMessage) ([]byte, error) {
	m, err := jsonrpc.Parse(prev)
	if err != nil {
		return nil, err
	}
	upID := []byte(strconv.FormatInt(up, 10))
	idSpan, _ := m.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, Value: upID}}
	if s, ok := m.ParamsPath("_meta", "progressToken"); ok && hasToken {
		edits = append(edits, jsonrpc.Edit{Span: s, Value: upID})
	}
	inputs, _ := json.Marshal(answers)
	set := map[string]json.RawMessage{"inputResponses": inputs}
	if len(state) > 0 {
		set["requestState"] = state
	}
	for name, val := range set {
		if s, ok := m.ParamsPath(name); ok {
			edits = append(edits, jsonrpc.Edit{Span: s, Value: val})
			delete(set, name)
		}
	}
	if len(set) > 0 {
		edits = append(edits, jsonrpc.InsertMembers(m.Frame, jsonrpc.SpanOf(m.Frame, m.Params), set, nil))
	}
	return jsonrpc.Splice(m.Frame, edits...), nil
}
