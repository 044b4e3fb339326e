package mux

import (
	"context"
	"fmt"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/protocol"
)

// open makes a started process ready to serve, the one time mcpmux does it
// for that process, and describes the server: the sessions' own
// initialize requests are answered from what it returns.
func (h *Hub) open(ctx context.Context, proc process) (*serverInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.StartTimeout)
	defer cancel()
	return h.initialize(ctx, proc)
}

// initialize opens a legacy server.
func (h *Hub) initialize(ctx context.Context, proc process) (*serverInfo, error) {
	params := map[string]any{
		"protocolVersion": protocol.LatestLegacy,
		"capabilities":    h.clientCapabilities(),
		"clientInfo":      map[string]any{"name": "mcpmux", "version": h.cfg.Version},
	}
	m, err := h.call(ctx, proc, "initialize", params)
	if err != nil {
		return nil, err
	}
	if m.Kind == jsonrpc.KindError {
		return nil, fmt.Errorf("server answered %s", m.Error)
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

// clientCapabilities is what mcpmux, the server's one client, declares.
func (h *Hub) clientCapabilities() map[string]any {
	c := map[string]any{
		// mcpmux routes these to the session that asked, honouring what
		// each session declared (tools, context, modes).
		"sampling":    map[string]any{"tools": map[string]any{}, "context": map[string]any{}},
		"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
	}
	if h.declaresRoots() {
		c["roots"] = map[string]any{"listChanged": true}
	}
	return c
}
