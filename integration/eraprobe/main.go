// Command eraprobe is a probe MCP server on the go-sdk, for the era tests
// (../eras_direct_test.go). It serves both eras on one stdio connection the
// way the go-sdk does, per request: initialize opens a legacy (2025-11-25)
// session, server/discover and requests carrying the 2026-07-28 _meta
// envelope are served modern.
//
// It has the same tools and resource as node/tsv2-server.mjs:
//
//	echo      {text} -> "echo: TEXT"
//	progress  {steps=3} -> one notifications/progress per step, then "progress done"
//	slow      one progress notification when it starts, then waits for the
//	          request to be cancelled and writes "slow cancelled" on stderr
//	          (the go-sdk still sends an answer for the returned handler: an
//	          error, which the client must drop)
//	log       an info and a debug notifications/message
//	confirm   an elicitation: an input request the client fulfils (modern),
//	          or that the go-sdk turns into elicitation/create (legacy)
//	sample    a sampling, the same way
//	touch     notifications/resources/updated for test://r to the sessions
//	          that subscribed, and notifications/tools/list_changed
package main

//lint:file-ignore SA1019 the probe serves logging and sampling, which 2026-07-28 deprecates but both eras still carry

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const resourceURI = "test://r"

// slowLimit bounds how long slow waits for its cancel, so that a lost
// cancel cannot keep the call open for ever.
const slowLimit = 2 * time.Minute

func main() {
	log.SetFlags(0)
	log.SetPrefix("eraprobe: ")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s := newServer()
	log.Print("ready")
	if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "goprobe", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
			Logging:   &mcp.LoggingCapabilities{},
		},
		// The go-sdk keeps the subscriptions itself; these only accept them.
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&mcp.Resource{URI: resourceURI, Name: "r", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: resourceURI, MIMEType: "text/plain", Text: "the resource r"}}}, nil
		})

	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo the text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text("echo: " + in.Text), nil, nil
		})
	type progressIn struct {
		Steps int `json:"steps,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "progress notifications"},
		func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, any, error) {
			n := in.Steps
			if n == 0 {
				n = 3
			}
			for i := 1; i <= n; i++ {
				if err := notifyProgress(ctx, req, float64(i), float64(n)); err != nil {
					return nil, nil, err
				}
			}
			return text("progress done"), nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "wait until cancelled", InputSchema: emptyObject()}, slow)
	s.AddTool(&mcp.Tool{Name: "log", Description: "an info and a debug log message", InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for _, l := range []struct{ level, data string }{{"info", "info line from tool"}, {"debug", "debug line from tool"}} {
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(l.level), Data: l.data}); err != nil {
					return nil, err
				}
			}
			return text("logged"), nil
		})
	s.AddTool(&mcp.Tool{Name: "confirm", Description: "elicitation", InputSchema: emptyObject()}, confirm)
	s.AddTool(&mcp.Tool{Name: "sample", Description: "sampling", InputSchema: emptyObject()}, sample)
	addTouch(s)
	return s
}

// addTouch (re)registers touch. Registering a tool again is what makes the
// go-sdk send tools/list_changed, so touch re-registers itself.
func addTouch(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "touch", Description: "resources/updated for test://r and tools/list_changed", InputSchema: emptyObject()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: resourceURI}); err != nil {
				return nil, err
			}
			addTouch(s)
			return text("touched"), nil
		})
}

func slow(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := notifyProgress(ctx, req, 0, 1); err != nil {
		return nil, err
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		log.Printf("slow cancelled after %dms", time.Since(start).Milliseconds())
		return nil, fmt.Errorf("slow cancelled")
	case <-time.After(slowLimit):
		return text("slow was never cancelled"), nil
	}
}

func confirm(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok && r != nil {
		return text(fmt.Sprintf("confirmed action=%s ok=%v state=%s", r.Action, r.Content["ok"], req.Params.RequestState)), nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Message: "Proceed?",
			RequestedSchema: map[string]any{
				"type":       "object",
				"properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
				"required":   []string{"ok"},
			},
		}},
		RequestState: "round-1",
	}, nil
}

func sample(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r, ok := req.Params.InputResponses["llm"].(*mcp.CreateMessageWithToolsResult); ok && r != nil {
		var said strings.Builder
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				said.WriteString(t.Text)
			}
		}
		return text(fmt.Sprintf("sampled: %s model=%s", said.String(), r.Model)), nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"llm": &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hi"}}},
			MaxTokens: 16,
		}},
		RequestState: "round-1",
	}, nil
}

// notifyProgress sends one progress notification for req, if it has a token.
func notifyProgress(ctx context.Context, req *mcp.CallToolRequest, progress, total float64) error {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	return req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total})
}

func text(t string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
}

// emptyObject is the input schema of the tools without arguments (a map,
// so that this command needs no JSON Schema package of its own).
func emptyObject() map[string]any {
	return map[string]any{"type": "object"}
}
