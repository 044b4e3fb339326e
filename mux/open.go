package mux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// Protocol settings of a server: which era mcpmux opens it in.
const (
	ProtocolAuto   = "auto"   // initialize, else server/discover
	ProtocolLegacy = "legacy" // initialize only
	ProtocolModern = "modern" // server/discover only
)

// open makes a started process ready to serve, the one time mcpmux does it
// for that process, and describes the server: every session is answered
// from what it returns. In "auto", the server is asked for initialize
// first: a server of either era accepts it or says it is modern. It is
// not probed with server/discover first: a server that serves both eras may
// take the probe to mean the whole connection is modern (the go-sdk does),
// and from then on refuse to send the sampling and elicitation requests its
// tools rely on. A legacy connection loses nothing: mcpmux serves modern
// sessions over it through its bridge. Any refusal of initialize (not one
// error code) sends mcpmux on to server/discover.
func (h *Hub) open(ctx context.Context, proc process) (*serverInfo, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, h.cfg.InitializeTimeout, fmt.Errorf("initialize_timeout (%s) passed", h.cfg.InitializeTimeout))
	defer cancel()
	switch h.cfg.Protocol {
	case ProtocolLegacy:
		return h.initialize(ctx, proc)
	case ProtocolModern:
		return h.discover(ctx, proc)
	}
	info, err := h.initialize(ctx, proc)
	var refused *refusedError
	if !errors.As(err, &refused) {
		return info, err
	}
	modern, derr := h.discover(ctx, proc)
	if derr != nil {
		return nil, fmt.Errorf("%w; and %w", err, derr) // each names its request
	}
	h.log.Info("server refused initialize and answered server/discover: serving it modern", "refusal", string(refused.answer))
	return modern, nil
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

// refusedError: the server answered initialize with an error.
type refusedError struct {
	answer json.RawMessage
}

func (e *refusedError) Error() string { return "server answered initialize with " + string(e.answer) }

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
		return nil, &refusedError{answer: m.Error}
	}
	info, err := parseInitResult(m.Result)
	if err != nil {
		return nil, err
	}
	n, _ := jsonrpc.Notification("notifications/initialized", nil)
	if err := proc.Send(n); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return info, nil
}

// clientCapabilities is what mcpmux, the server's one client, declares:
// the configured upstream_capabilities as written, else sampling and
// elicitation in the plain shapes every SDK accepts ({} is form mode); and
// roots when mcpmux has roots to answer with (unless the written table says
// otherwise). Each session is sent only what it declared itself.
func (h *Hub) clientCapabilities() any {
	c := map[string]any{
		"sampling":    map[string]any{},
		"elicitation": map[string]any{},
	}
	if len(h.cfg.UpstreamCapabilities) > 0 {
		var written map[string]json.RawMessage
		if json.Unmarshal(h.cfg.UpstreamCapabilities, &written) != nil {
			return h.cfg.UpstreamCapabilities
		}
		c = make(map[string]any, len(written)+1)
		for k, v := range written {
			c[k] = v
		}
	}
	if _, set := c["roots"]; h.declaresRoots() && !set {
		c["roots"] = map[string]any{"listChanged": true}
	}
	return c
}

// protocolAllows: a server configured with protocol may be of era e.
func protocolAllows(protocol string, e era) bool {
	switch protocol {
	case ProtocolLegacy:
		return e == eraLegacy
	case ProtocolModern:
		return e == eraModern
	}
	return true
}
