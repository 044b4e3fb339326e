package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// Protocol settings of a server: which era mcpmux opens it in.
const (
	ProtocolAuto   = "auto"   // probe server/discover, else initialize
	ProtocolLegacy = "legacy" // initialize only
	ProtocolModern = "modern" // server/discover only
)

// probeTimeout bounds the wait for the answer to server/discover before a
// server is taken for legacy. A server that is merely slow to start is
// still opened right: a legacy one answers the initialize that follows, and
// a modern one refuses it naming the modern revision, which sends mcpmux
// back to server/discover.
const probeTimeout = 10 * time.Second

// open makes a started process ready to serve, the one time mcpmux does it
// for that process, and describes the server: every session is answered
// from what it returns.
func (h *Hub) open(ctx context.Context, proc process) (*serverInfo, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, h.cfg.InitializeTimeout, fmt.Errorf("initialize_timeout (%s) passed", h.cfg.InitializeTimeout))
	defer cancel()
	switch h.cfg.Protocol {
	case ProtocolLegacy:
		return h.initialize(ctx, proc)
	case ProtocolModern:
		return h.discover(ctx, proc)
	}
	info, err := h.probe(ctx, proc)
	if info != nil || err != nil {
		return info, err
	}
	info, err = h.initialize(ctx, proc)
	var modern *modernOnlyError
	if errors.As(err, &modern) {
		h.log.Info("server refused initialize for the modern revision; opening it modern", "supported", modern.supported)
		return h.discover(ctx, proc)
	}
	return info, err
}

// probe asks the server for server/discover. It returns the server's
// description when the server is modern, nothing when it is not (any
// error answer that is not modern evidence, an answer mcpmux cannot use,
// or none within probeTimeout), and an error only when the process is gone
// or ctx ended.
func (h *Hub) probe(ctx context.Context, proc process) (*serverInfo, error) {
	pctx, cancel := context.WithTimeout(ctx, min(probeTimeout, h.cfg.InitializeTimeout))
	defer cancel()
	m, err := h.call(pctx, proc, "server/discover", h.discoverParams())
	switch {
	case err != nil && (ctx.Err() != nil || isClosed(proc.Done())):
		return nil, err
	case err != nil:
		h.log.Info("server did not answer server/discover in time; opening it legacy", "timeout", min(probeTimeout, h.cfg.InitializeTimeout))
		return nil, nil
	case m.Kind == jsonrpc.KindError:
		h.log.Debug("server refused server/discover; opening it legacy", "error", string(m.Error))
		return nil, nil
	}
	info, err := parseDiscoverResult(m.Result)
	if err != nil {
		h.log.Info("server's server/discover answer is not modern; opening it legacy", "why", err)
		return nil, nil
	}
	return info, nil
}

// discover opens a modern server.
func (h *Hub) discover(ctx context.Context, proc process) (*serverInfo, error) {
	m, err := h.call(ctx, proc, "server/discover", h.discoverParams())
	if err != nil {
		return nil, err
	}
	if m.Kind == jsonrpc.KindError {
		return nil, fmt.Errorf("server answered server/discover with %s", m.Error)
	}
	return parseDiscoverResult(m.Result)
}

// discoverParams is mcpmux's own envelope, as the server's one client.
func (h *Hub) discoverParams() map[string]any {
	return map[string]any{"_meta": h.ownEnvelope()}
}

func (h *Hub) ownEnvelope() map[string]any {
	return map[string]any{
		protocol.MetaProtocolVersion:    protocol.Modern,
		protocol.MetaClientInfo:         h.clientInfo(),
		protocol.MetaClientCapabilities: h.clientCapabilities(),
	}
}

func (h *Hub) clientInfo() map[string]any {
	return map[string]any{"name": "mcpmux", "version": h.cfg.Version}
}

// modernOnlyError: the server refused initialize, naming the modern
// revision among the ones it supports.
type modernOnlyError struct {
	supported []string
	answer    json.RawMessage
}

func (e *modernOnlyError) Error() string { return "server answered " + string(e.answer) }

// initialize opens a legacy server.
func (h *Hub) initialize(ctx context.Context, proc process) (*serverInfo, error) {
	params := map[string]any{
		"protocolVersion": protocol.LatestLegacy,
		"capabilities":    h.clientCapabilities(),
		"clientInfo":      h.clientInfo(),
	}
	m, err := h.call(ctx, proc, "initialize", params)
	if err != nil {
		return nil, err
	}
	if m.Kind == jsonrpc.KindError {
		return nil, initializeRefused(m.Error)
	}
	info, err := parseInitResult(m.Result)
	if err != nil {
		return nil, err
	}
	n, _ := jsonrpc.Notification("notifications/initialized", nil)
	if err := proc.Send(n); err != nil {
		return nil, err
	}
	return info, nil
}

// initializeRefused is the error of a refused initialize: a
// *modernOnlyError when the refusal names the modern revision.
func initializeRefused(e json.RawMessage) error {
	var body struct {
		Code int `json:"code"`
		Data struct {
			Supported []string `json:"supported"`
		} `json:"data"`
	}
	if json.Unmarshal(e, &body) == nil && body.Code == protocol.CodeUnsupportedVersion && slices.Contains(body.Data.Supported, protocol.Modern) {
		return &modernOnlyError{supported: body.Data.Supported, answer: e}
	}
	return fmt.Errorf("server answered %s", e)
}

// clientCapabilities is what mcpmux, the server's one client, declares:
// the configured upstream_capabilities as written, else sampling and
// elicitation in the plain shapes every SDK accepts ({} is form mode), and
// roots when mcpmux has roots to answer with. Each session is sent only
// what it declared itself.
func (h *Hub) clientCapabilities() any {
	if len(h.cfg.UpstreamCapabilities) > 0 {
		return h.cfg.UpstreamCapabilities
	}
	c := map[string]any{
		"sampling":    map[string]any{},
		"elicitation": map[string]any{},
	}
	if h.declaresRoots() {
		c["roots"] = map[string]any{"listChanged": true}
	}
	return c
}
