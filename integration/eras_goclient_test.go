package integration

//lint:file-ignore SA1019 the probe client exercises sampling and logging, which 2026-07-28 deprecates but both eras still carry

// The go-sdk probe client of the era tier: the go-sdk's own Client in its
// default mode (it probes server/discover and serves the modern era when the
// server does, else falls back to initialize with 2025-11-25), running the
// same nine checks as node/tsv2-client.mjs and reporting in the same shape
// (eraReport), with its wire recorded by gpRecorder.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// eraGoNoteTimeout bounds the wait for a notification a check expects.
const eraGoNoteTimeout = 5 * time.Second

// eraGoClient runs the go-sdk probe client on ep: spawning ep.argv with
// CommandTransport, or over the Unix socket ep.socket with IOTransport.
func eraGoClient(t *testing.T, ep eraEndpoint) eraReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rwScriptTimeout)
	defer cancel()
	rep := eraReport{Client: "go-sdk", Mode: "default"}
	var transport mcp.Transport
	var stderr testutil.Buffer
	switch {
	case ep.argv != nil:
		rep.Transport = "stdio"
		cmd := exec.CommandContext(ctx, ep.argv[0], ep.argv[1:]...)
		cmd.Env = append(cmd.Environ(), ep.env...)
		cmd.Stderr = &stderr
		cmd.WaitDelay = 5 * time.Second
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	case ep.socket != "":
		rep.Transport = "socket"
		conn, err := net.DialTimeout("unix", ep.socket, ioTimeout)
		require.NoError(t, err)
		defer conn.Close()
		transport = &mcp.IOTransport{Reader: conn, Writer: conn}
	default:
		t.Fatalf("the go-sdk client reaches a server by a command or a socket, not %+v", ep)
	}
	wire := &gpWire{}
	eraGoSession(ctx, &rep, gpRecorder{transport, wire})
	for _, m := range wire.all() {
		dir := "in"
		if m.Out {
			dir = "out"
		}
		rep.Wire = append(rep.Wire, eraWireMsg{Hop: "session", Dir: dir, Msg: json.RawMessage(m.Raw)})
	}
	rep.Stderr = strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	return rep
}

// eraGoSession connects, runs the checks and closes the session.
func eraGoSession(ctx context.Context, rep *eraReport, transport gpRecorder) {
	client := mcp.NewClient(&mcp.Implementation{Name: "goprobe-client", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: &mcp.TextContent{Text: "hi from the client"}, Model: "probe-model", StopReason: "endTurn"}, nil
		},
		// As an editor would: on the modern era this makes the client open a
		// listen for tools/list_changed as it connects.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	start := time.Now()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		rep.ConnectError = &eraConnectError{Message: err.Error()}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) {
			rep.ConnectError.Code = json.RawMessage(strconv.FormatInt(werr.Code, 10))
		}
		return
	}
	defer cs.Close()
	rep.Connected = true
	rep.ConnectMs = time.Since(start).Milliseconds()
	if init := cs.InitializeResult(); init != nil {
		rep.ProtocolVersion = init.ProtocolVersion
		if init.ServerInfo != nil {
			rep.ServerName = init.ServerInfo.Name
		}
	}
	rep.Era = eraLegacy
	if rep.ProtocolVersion >= eraModernVersion {
		rep.Era = eraModern
	}
	g := &eraGoChecks{ctx: ctx, cs: cs, wire: transport.wire, modern: rep.Era == eraModern}
	rep.Checks = g.run()
}

// eraGoChecks runs the nine checks on one session.
type eraGoChecks struct {
	ctx    context.Context
	cs     *mcp.ClientSession
	wire   *gpWire
	modern bool
	slowID json.RawMessage
}

func (g *eraGoChecks) run() []eraCheck {
	steps := []struct {
		name string
		fn   func() (bool, any, error)
	}{
		{"tools/list", g.toolsList},
		{"call", func() (bool, any, error) { return g.echo("hello") }},
		{"progress", g.progress},
		{"elicitation", func() (bool, any, error) { return g.callText("confirm", "confirmed action=accept ok=true", true) }},
		{"sampling", func() (bool, any, error) {
			return g.callText("sample", "sampled: hi from the client model=probe-model", false)
		}},
		{"logging", g.logging},
		{"subscribe", g.subscribe},
		{"cancel", g.cancel},
		{"call after cancel", func() (bool, any, error) { return g.echo("after cancel") }},
	}
	var checks []eraCheck
	for _, s := range steps {
		pass, detail, err := s.fn()
		if err != nil {
			pass, detail = false, "error: "+err.Error()
		}
		b, _ := json.Marshal(detail)
		checks = append(checks, eraCheck{Name: s.name, Pass: pass, Detail: b})
	}
	return checks
}

func (g *eraGoChecks) toolsList() (bool, any, error) {
	res, err := g.cs.ListTools(g.ctx, nil)
	if err != nil {
		return false, nil, err
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range eraTools {
		if !slices.Contains(names, want) {
			return false, names, nil
		}
	}
	return true, names, nil
}

// call calls tool and returns the text of its result.
func (g *eraGoChecks) call(ctx context.Context, params *mcp.CallToolParams) (string, error) {
	res, err := g.cs.CallTool(ctx, params)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", b.String())
	}
	return b.String(), nil
}

func (g *eraGoChecks) echo(text string) (bool, any, error) {
	got, err := g.call(g.ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	return got == "echo: "+text, got, err
}

// callText calls a tool without arguments; its text must have want as its
// prefix (prefix) or be want.
func (g *eraGoChecks) callText(tool, want string, prefix bool) (bool, any, error) {
	got, err := g.call(g.ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	return got == want || (prefix && strings.HasPrefix(got, want)), got, err
}

func (g *eraGoChecks) progress() (bool, any, error) {
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
	params.SetProgressToken("go-progress")
	got, err := g.call(g.ctx, params)
	n := len(g.received(func(m gpMsg) bool {
		return m.Method == "notifications/progress" && eraToken(m) == `"go-progress"`
	}))
	return got == "progress done" && n == 3, map[string]any{"text": got, "notifications": n}, err
}

func (g *eraGoChecks) logging() (bool, any, error) {
	params := &mcp.CallToolParams{Name: "log", Arguments: map[string]any{}}
	if g.modern {
		params.Meta = mcp.Meta{"io.modelcontextprotocol/logLevel": "debug"}
	} else if err := g.cs.SetLoggingLevel(g.ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		return false, nil, err
	}
	got, err := g.call(g.ctx, params)
	if err != nil {
		return false, nil, err
	}
	logged := func(data string) bool {
		_, ok := g.waitFor(func(m gpMsg) bool {
			var p struct {
				Data string `json:"data"`
			}
			json.Unmarshal(m.Params, &p)
			return !m.Out && m.Method == "notifications/message" && p.Data == data
		})
		return ok
	}
	info, debug := logged("info line from tool"), logged("debug line from tool")
	return got == "logged" && info && debug, map[string]any{"text": got, "info": info, "debug": debug}, nil
}

// subscribe subscribes to test://r (on the modern era the go-sdk opens a
// listen for it and returns before the server acknowledged it, so the check
// waits for the acknowledgement), touches it and waits for its update.
func (g *eraGoChecks) subscribe() (bool, any, error) {
	if err := g.cs.Subscribe(g.ctx, &mcp.SubscribeParams{URI: eraResource}); err != nil {
		return false, nil, err
	}
	var listenID json.RawMessage
	if g.modern {
		listen := g.sent(func(m gpMsg) bool {
			return m.isRequest() && m.Method == "subscriptions/listen" && strings.Contains(string(m.Params), eraResource)
		})
		if len(listen) == 0 {
			return false, "no subscriptions/listen for " + eraResource, nil
		}
		listenID = listen[len(listen)-1].ID
		if _, ok := g.waitFor(func(m gpMsg) bool {
			return !m.Out && m.Method == "notifications/subscriptions/acknowledged" && eraSubscriptionID(m) == string(listenID)
		}); !ok {
			return false, "the listen was not acknowledged", nil
		}
	}
	got, err := g.call(g.ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{}})
	if err != nil {
		return false, nil, err
	}
	_, updated := g.waitFor(func(m gpMsg) bool {
		return !m.Out && m.Method == "notifications/resources/updated" && strings.Contains(string(m.Params), eraResource) &&
			(!g.modern || eraSubscriptionID(m) == string(listenID))
	})
	if err := g.cs.Unsubscribe(g.ctx, &mcp.UnsubscribeParams{URI: eraResource}); err != nil {
		return false, nil, err
	}
	return got == "touched" && updated, map[string]any{"text": got, "updated": updated, "listenId": listenID}, nil
}

// cancel calls slow, waits for its first progress notification, cancels the
// call's context and checks that notifications/cancelled went out for it.
func (g *eraGoChecks) cancel() (bool, any, error) {
	ctx, cancel := context.WithCancel(g.ctx)
	defer cancel()
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
	params.SetProgressToken("go-slow")
	done := make(chan error, 1)
	go func() { // waited for below
		_, err := g.call(ctx, params)
		done <- err
	}()
	_, started := g.waitFor(func(m gpMsg) bool {
		return !m.Out && m.Method == "notifications/progress" && eraToken(m) == `"go-slow"`
	})
	cancel()
	err := <-done
	if slow := g.sent(func(m gpMsg) bool { return m.isRequest() && strings.Contains(string(m.Params), `"slow"`) }); len(slow) > 0 {
		g.slowID = slow[0].ID
	}
	// The go-sdk sends the notification as the call returns, not before.
	_, note := g.waitFor(func(m gpMsg) bool {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		json.Unmarshal(m.Params, &p)
		return m.Out && m.Method == "notifications/cancelled" && g.slowID != nil && string(p.RequestID) == string(g.slowID)
	})
	detail := map[string]any{"started": started, "rejected": err != nil, "notification": note}
	return started && err != nil && note, detail, nil
}

func (g *eraGoChecks) received(pred func(gpMsg) bool) []gpMsg {
	var out []gpMsg
	for _, m := range g.wire.all() {
		if !m.Out && pred(m) {
			out = append(out, m)
		}
	}
	return out
}

func (g *eraGoChecks) sent(pred func(gpMsg) bool) []gpMsg {
	var out []gpMsg
	for _, m := range g.wire.sent() {
		if pred(m) {
			out = append(out, m)
		}
	}
	return out
}

// waitFor polls the wire until a message matches pred or eraGoNoteTimeout
// has passed.
func (g *eraGoChecks) waitFor(pred func(gpMsg) bool) (gpMsg, bool) {
	deadline := time.Now().Add(eraGoNoteTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if got := eraAll(g.wire.all(), pred); len(got) > 0 {
			return got[0], true
		}
		if time.Now().After(deadline) {
			return gpMsg{}, false
		}
		select {
		case <-tick.C:
		case <-g.ctx.Done():
			return gpMsg{}, false
		}
	}
}
