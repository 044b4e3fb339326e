package integration

// The real-world tier: the reference MCP servers from npm
// (@modelcontextprotocol/server-everything, -memory, -filesystem) behind
// mcpmux, driven by the TypeScript SDK's own Client over its own transports
// (StdioClientTransport spawning `mcpmux connect`, WebSocketClientTransport).
// The clients are .mjs scripts in ./node; they record every message on the
// wire and report it as one JSON line, and these tests assert on it. See
// realworld_helpers_test.go for the harness.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// everythingTools are tools of the pinned server-everything: the ones it
// always has, and the ones it registers only for a client that declares
// sampling or elicitation (mcpmux declares both to the server, and routes
// the requests to sessions that declared them).
var everythingTools = []string{
	"echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
	"get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
	"toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
	"trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation", "simulate-research-query",
}

// rwFast makes a stop quick: server-everything does not exit on stdin EOF
// once it has run a task, and there is no reason to wait 2 s for it.
const rwFast = `stdin_grace = "250ms"`

// TestRealWorldEverything: one TypeScript SDK client at a time against
// server-everything, over `mcpmux connect` and over WebSocket: the tools,
// an echo, and a long-running operation's progress, counted on the wire.
func TestRealWorldEverything(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	d := startDaemon(t, rw.server("everything", rwEverything, []string{"stdio"}, rwFast, rwURLElicitation), rwListen)

	type basic struct {
		Init  rwInit   `json:"init"`
		Tools []string `json:"tools"`
		Echo  struct {
			Text       string          `json:"text"`
			RequestID  json.RawMessage `json:"requestId"`
			ResponseID json.RawMessage `json:"responseId"`
		} `json:"echo"`
		Long struct {
			Text      string          `json:"text"`
			Token     json.RawMessage `json:"token"`
			Progress  []rwProgress    `json:"progress"`
			Callbacks int             `json:"callbacks"`
		} `json:"long"`
		Refused []struct {
			URL       string `json:"url"`
			Connected bool   `json:"connected"`
			Error     string `json:"error"`
		} `json:"refused"`
	}
	const steps = 5
	check := func(t *testing.T, kind string, r basic) {
		assert.Equal(t, "mcp-servers/everything", r.Init.ServerName)
		assert.NotEmpty(t, r.Init.ProtocolVersion)
		assert.JSONEq(t, "0", string(r.Init.RequestID), "the SDK numbers its requests from 0")
		assert.JSONEq(t, "0", string(r.Init.ResponseID))
		if tasks, ok := r.Init.Capabilities["tasks"].(map[string]any); assert.True(t, ok, "capabilities: %v", r.Init.Capabilities) {
			assert.NotContains(t, tasks, "list", "mcpmux does not offer tasks/list")
			assert.Contains(t, tasks, "cancel")
		}
		assert.Subset(t, r.Tools, everythingTools)
		assert.NotContains(t, r.Tools, "get-roots-list", "no roots configured: mcpmux declares none, so the server has no roots tool")

		assert.Equal(t, "Echo: hello over "+kind, r.Echo.Text)
		assert.JSONEq(t, string(r.Echo.RequestID), string(r.Echo.ResponseID), "the answer carries the client's own id")

		assert.Equal(t, "Long running operation completed. Duration: 1 seconds, Steps: 5.", r.Long.Text)
		checkProgress(t, kind, r.Long.Progress, r.Long.Token, steps)
		if r.Long.Callbacks != steps { // the SDK's own race, not mcpmux's (see node/lib.mjs)
			t.Logf("%s: the SDK's onprogress ran %d times for %d notifications on the wire", kind, r.Long.Callbacks, steps)
		}
	}

	t.Run("connect", func(t *testing.T) {
		t.Parallel()
		var r basic
		rw.runScript(t, "everything-basic.mjs", map[string]any{"target": connectTarget(d, "everything"), "steps": steps}, &r, nil)
		check(t, "connect", r)
	})
	t.Run("websocket", func(t *testing.T) {
		t.Parallel()
		var r basic
		rw.runScript(t, "everything-basic.mjs", map[string]any{
			"target": wsTarget(d, "everything", rwToken),
			"steps":  steps,
			"refused": []any{
				wsTarget(d, "everything", ""),
				wsTarget(d, "everything", "not-the-token"),
			},
		}, &r, nil)
		check(t, "ws", r)
		require.Len(t, r.Refused, 2)
		for _, f := range r.Refused {
			assert.False(t, f.Connected, "the SDK client connected to %s", f.URL)
		}
		// Both were refused (above); the log says so once, then counts
		// the peer's further refusals in its interval.
		assert.Contains(t, d.log(), "status=401", "the daemon logged its refusal of a handshake for its token")
	})
	t.Cleanup(func() { oneProcess(t, d, "everything") })
}

// levels are the MCP log levels, least severe first.
var levels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func atLeast(level, min string) bool {
	return slices.Index(levels, level) >= slices.Index(levels, min)
}

// simulatedLog matches the messages of toggle-simulated-logging
// ("Debug-level message", ..., "Alert level-message").
var simulatedLog = regexp.MustCompile(`^[A-Z][a-z]+[- ]level[- ]message`)

// TestRealWorldEverythingManyClients: five TypeScript SDK clients at once,
// each over its own `mcpmux connect`, on one server-everything: colliding
// ids and progress tokens, progress to its owner only, per-session log
// levels, subscriptions, configured roots and task ownership; and on a
// second server-everything with server_requests = "serialize", sampling and
// elicitation answered by the client whose call caused them, several calls
// at once.
func TestRealWorldEverythingManyClients(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	d := startDaemon(t,
		rw.server("everything", rwEverything, []string{"stdio"}, rwFast, rwURLElicitation, `roots = ["file:///tmp/mx-roots"]`)+
			rw.server("everything-serial", rwEverything, []string{"stdio"}, rwFast, rwURLElicitation, `server_requests = "serialize"`),
		"")

	type serverRequest struct {
		Method  string `json:"method"`
		Prompt  string `json:"prompt"`
		Message string `json:"message"`
	}
	type logMsg struct {
		Level string `json:"level"`
		Data  string `json:"data"`
	}
	type mainClient struct {
		Init rwInit `json:"init"`
		Echo struct {
			RequestID  json.RawMessage `json:"requestId"`
			ResponseID json.RawMessage `json:"responseId"`
			Text       string          `json:"text"`
		} `json:"echo"`
		Long struct {
			Token json.RawMessage `json:"token"`
			Text  string          `json:"text"`
		} `json:"long"`
		Progress []rwProgress `json:"progress"`
		Updates  struct {
			BothSubscribed   []string `json:"bothSubscribed"`
			AfterUnsubscribe []string `json:"afterUnsubscribe"`
		} `json:"updates"`
		Roots          string          `json:"roots"`
		Logs           []logMsg        `json:"logs"`
		ServerRequests []serverRequest `json:"serverRequests"`
		TaskStatus     []string        `json:"taskStatus"`
	}
	type foreignCall struct {
		Code int `json:"code"`
		Data struct {
			Reason string `json:"reason"`
		} `json:"data"`
		Method   string          `json:"method"`
		Resolved json.RawMessage `json:"resolved"`
	}
	type serialClient struct {
		Init            rwInit          `json:"init"`
		Sampling        string          `json:"sampling"`
		SamplingIsError bool            `json:"samplingIsError"`
		SamplingMs      int             `json:"samplingMs"`
		Elicitation     string          `json:"elicitation"`
		ServerRequests  []serverRequest `json:"serverRequests"`
	}
	var r struct {
		Main struct {
			C0, C1, C2, C3, C4 mainClient
			Tasks              struct {
				TaskID        string                 `json:"taskId"`
				CreatedStatus string                 `json:"createdStatus"`
				Statuses      []string               `json:"statuses"`
				Foreign       map[string]foreignCall `json:"foreign"`
				Result        string                 `json:"result"`
				Error         string                 `json:"error"`
				OwnerGetAfter string                 `json:"ownerGetAfter"`
			} `json:"tasks"`
		} `json:"main"`
		Serial struct {
			S0, S1, S2, S3 serialClient
		} `json:"serial"`
	}

	var pids [2]int
	rw.runScript(t, "everything-multi.mjs", map[string]any{
		"mcpmux": bins.mcpmux, "config": d.path, "main": "everything", "serial": "everything-serial",
		"logWaitMs": 10600, // simulated logging sends at once, then every 5 s: three messages
	}, &r, func(string) {
		// Every client is a session of the one process of its server.
		var clients map[string]string
		// The clients' initialize may have been answered from what mcpmux
		// remembers of the server while it still starts: its pid comes
		// once it is ready.
		for _, name := range []string{"everything", "everything-serial"} {
			testutil.Until(t, readyTimeout, name+" ready", func() bool {
				pid, _, _ := rwServerStatus(t, d, name)
				return pid != 0
			})
		}
		pids[0], _, clients = rwServerStatus(t, d, "everything")
		for _, name := range []string{"c0", "c1", "c2", "c3", "c4"} {
			assert.Contains(t, clients, name, "sessions of everything")
		}
		pids[1], _, clients = rwServerStatus(t, d, "everything-serial")
		for _, name := range []string{"s0", "s1", "s2", "s3"} {
			assert.Contains(t, clients, name, "sessions of everything-serial")
		}
	})

	mainClients := map[string]*mainClient{"c0": &r.Main.C0, "c1": &r.Main.C1, "c2": &r.Main.C2, "c3": &r.Main.C3, "c4": &r.Main.C4}
	names := []string{"c0", "c1", "c2", "c3", "c4"}

	t.Run("ids", func(t *testing.T) {
		// Every TS client numbered its initialize 0 and its echo 1: the
		// same ids, in flight at once, each answered with its own text.
		for _, n := range names {
			c := mainClients[n]
			assert.JSONEq(t, "0", string(c.Init.RequestID), n)
			assert.JSONEq(t, "0", string(c.Init.ResponseID), n)
			assert.JSONEq(t, "1", string(c.Echo.RequestID), n)
			assert.JSONEq(t, "1", string(c.Echo.ResponseID), n)
			assert.Equal(t, "Echo: from "+n, c.Echo.Text, n)
		}
	})

	t.Run("progress", func(t *testing.T) {
		// Five long operations at once, all under progress token 2 (the
		// SDK uses its request id): each client gets its own four
		// notifications, none of the others'.
		for _, n := range names {
			c := mainClients[n]
			assert.JSONEq(t, "2", string(c.Long.Token), n)
			assert.Equal(t, "Long running operation completed. Duration: 1 seconds, Steps: 4.", c.Long.Text, n)
			checkProgress(t, n, c.Progress, c.Long.Token, 4)
		}
	})

	t.Run("subscriptions", func(t *testing.T) {
		// c3 and c4 subscribed: each turn of the server's updates reaches
		// them, and only them; after c3 unsubscribed, only c4.
		uri := "demo://resource/static/document/architecture.md"
		for _, n := range names {
			c := mainClients[n]
			switch n {
			case "c3":
				assert.Equal(t, []string{uri}, c.Updates.BothSubscribed, n)
				assert.Equal(t, []string{uri}, c.Updates.AfterUnsubscribe, "%s unsubscribed: no more updates", n)
			case "c4":
				assert.Equal(t, []string{uri}, c.Updates.BothSubscribed, n)
				assert.Equal(t, []string{uri, uri}, c.Updates.AfterUnsubscribe, n)
			default:
				assert.Empty(t, c.Updates.AfterUnsubscribe, "%s never subscribed", n)
			}
		}
	})

	t.Run("logging", func(t *testing.T) {
		// c1 asked for debug, c2 for error, the others kept the default,
		// info. The simulated messages have random levels: each session
		// gets exactly those of c1's (which get everything) at or above
		// its own level, in the same order.
		level := map[string]string{"c0": "info", "c1": "debug", "c2": "error", "c3": "info", "c4": "info"}
		simulated := func(c *mainClient) []logMsg {
			var out []logMsg
			for _, m := range c.Logs {
				if simulatedLog.MatchString(m.Data) {
					out = append(out, m)
				}
			}
			return out
		}
		all := simulated(&r.Main.C1)
		assert.GreaterOrEqual(t, len(all), 3, "simulated log messages at debug level: %+v", all)
		for _, n := range names {
			var want []logMsg
			for _, m := range all {
				if atLeast(m.Level, level[n]) {
					want = append(want, m)
				}
			}
			assert.Equal(t, want, simulated(mainClients[n]), "%s at level %s", n, level[n])
			for _, m := range mainClients[n].Logs {
				assert.True(t, atLeast(m.Level, level[n]), "%s at level %s got %+v", n, level[n], m)
			}
			// The server logs (at info) the subscribe and unsubscribe it
			// sees: mcpmux passed on only the first subscribe and the
			// last unsubscribe of the URI, and c2 (error) sees neither.
			counts := map[string]int{}
			for _, m := range mainClients[n].Logs {
				switch {
				case strings.HasPrefix(m.Data, "Received Subscribe Resource request"):
					counts["subscribe"]++
				case strings.HasPrefix(m.Data, "Received Unsubscribe Resource request"):
					counts["unsubscribe"]++
				}
			}
			if n == "c2" {
				assert.Empty(t, counts, n)
			} else {
				assert.Equal(t, map[string]int{"subscribe": 1, "unsubscribe": 1}, counts, n)
			}
		}
		if t.Failed() {
			for _, n := range names {
				t.Logf("%s logs: %+v", n, mainClients[n].Logs)
			}
		}
	})

	t.Run("roots", func(t *testing.T) {
		// mcpmux answers the server's roots/list with the configured
		// roots; c0 declared roots of its own and is never asked.
		assert.Contains(t, r.Main.C0.Roots, "(1 total)")
		assert.Contains(t, r.Main.C0.Roots, "URI: file:///tmp/mx-roots")
		for _, n := range names {
			assert.Empty(t, mainClients[n].ServerRequests, "%s got requests from the server", n)
		}
	})

	t.Run("tasks", func(t *testing.T) {
		tk := r.Main.Tasks
		require.NotEmpty(t, tk.TaskID, "c1's task-mode call created no task (error: %s)", tk.Error)
		assert.Empty(t, tk.Error)
		assert.Equal(t, "working", tk.CreatedStatus)
		require.NotEmpty(t, tk.Statuses)
		assert.Equal(t, "completed", tk.Statuses[len(tk.Statuses)-1])
		assert.Equal(t, "completed", tk.OwnerGetAfter)
		assert.Contains(t, tk.Result, "# Research Report: shared servers")
		// c2 may not read, wait for or cancel c1's task, nor list tasks.
		for _, op := range []string{"get", "result", "cancel"} {
			f := tk.Foreign[op]
			assert.Equal(t, "tasks/"+op, f.Method)
			assert.Equal(t, -32602, f.Code, "c2's tasks/%s on c1's task: %+v", op, f)
			assert.Equal(t, "unknown_task", f.Data.Reason, "c2's tasks/%s", op)
		}
		assert.Equal(t, -32601, tk.Foreign["list"].Code)
		assert.Equal(t, "not_supported", tk.Foreign["list"].Data.Reason)
		// The task's status notifications reach its owner alone.
		assert.NotEmpty(t, r.Main.C1.TaskStatus, "c1 got no notifications/tasks/status")
		for _, id := range r.Main.C1.TaskStatus {
			assert.Equal(t, tk.TaskID, id)
		}
		for _, n := range []string{"c0", "c2", "c3", "c4"} {
			assert.Empty(t, mainClients[n].TaskStatus, "%s got c1's task status", n)
		}
	})

	t.Run("sampling and elicitation", func(t *testing.T) {
		// s0, s1 and s2 each called trigger-sampling-request at once: each
		// got the sampling request for its own prompt, and found its own
		// answer in its result. Then each called trigger-elicitation-request:
		// s0 and s2 accept, s1 declines.
		serial := map[string]*serialClient{"s0": &r.Serial.S0, "s1": &r.Serial.S1, "s2": &r.Serial.S2}
		for n, s := range serial {
			require.Len(t, s.ServerRequests, 2, "%s: requests from the server: %+v", n, s.ServerRequests)
			assert.Equal(t, "sampling/createMessage", s.ServerRequests[0].Method, n)
			assert.Equal(t, "Resource trigger-sampling-request context: from "+n, s.ServerRequests[0].Prompt, n)
			assert.Equal(t, "elicitation/create", s.ServerRequests[1].Method, n)
			assert.Equal(t, "Please provide inputs for the following fields:", s.ServerRequests[1].Message, n)
			assert.Contains(t, s.Sampling, `"text": "sampled by `+n+`"`, n)
			assert.Contains(t, s.Sampling, `"model": "model-of-`+n+`"`, n)
			if n == "s1" {
				assert.Contains(t, s.Elicitation, "❌ User declined", n)
			} else {
				assert.Contains(t, s.Elicitation, "✅ User provided the requested information!", n)
				assert.Contains(t, s.Elicitation, "- Name: user of "+n, n)
			}
		}
		// s3 declared neither capability: it is never asked, and its own
		// sampling call fails at once instead of waiting out the server's
		// 60 s timeout.
		s3 := r.Serial.S3
		assert.Empty(t, s3.ServerRequests)
		assert.True(t, s3.SamplingIsError, "s3's trigger-sampling-request: %s", s3.Sampling)
		assert.Less(t, s3.SamplingMs, 5000, "s3's trigger-sampling-request took %d ms", s3.SamplingMs)
		t.Logf("s3's sampling call: %q in %d ms", s3.Sampling, s3.SamplingMs)
	})

	for i, name := range []string{"everything", "everything-serial"} {
		pid := oneProcess(t, d, name)
		assert.Equal(t, pids[i], pid, "%s: the process of the checkpoint", name)
	}
}

// oneProcess asserts that the daemon started server name once and that it
// still runs, and returns its pid: every client of the test shared it.
func oneProcess(t *testing.T, d *daemon, name string) int {
	t.Helper()
	pid, restarts, _ := rwServerStatus(t, d, name)
	assert.NotZero(t, pid, "%s is not running", name)
	assert.Zero(t, restarts, "%s restarted", name)
	started := regexp.MustCompile(`msg="server started" server=`+regexp.QuoteMeta(name)+` `).FindAllString(d.log(), -1)
	assert.Len(t, started, 1, "%s: server starts in the daemon's log", name)
	return pid
}

// TestRealWorldMemory: three TypeScript SDK clients on one server-memory,
// over `mcpmux connect`, WebSocket and `mcpmux connect --yamux`: what one
// writes, the others read, and a raw client on the socket sees it all.
func TestRealWorldMemory(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	d := startDaemon(t, rw.server("memory", rwMemory, nil, `env = { MEMORY_FILE_PATH = "`+memoryFile+`" }`), rwListen)

	type entity struct {
		Name         string   `json:"name"`
		EntityType   string   `json:"entityType"`
		Observations []string `json:"observations"`
	}
	type relation struct {
		From         string `json:"from"`
		To           string `json:"to"`
		RelationType string `json:"relationType"`
	}
	type graph struct {
		Entities  []entity   `json:"entities"`
		Relations []relation `json:"relations"`
	}
	var r struct {
		BOpens     graph               `json:"bOpens"`
		CSearches  graph               `json:"cSearches"`
		AReads     graph               `json:"aReads"`
		BOpensBoth graph               `json:"bOpensBoth"`
		Updates    map[string][]string `json:"updates"`
	}
	const ent, other = "mcpmux-shared-entity", "mcpmux-other-entity"
	yamux := connectTarget(d, "memory")
	yamux["yamux"] = true
	rw.runScript(t, "memory.mjs", map[string]any{
		"connect": connectTarget(d, "memory"),
		"ws":      wsTarget(d, "memory", rwToken),
		"yamux":   yamux,
		"entity":  ent, "other": other,
	}, &r, func(string) {
		// The clients' initialize may have been answered from what mcpmux
		// remembers of the server while it still starts: its pid comes
		// once it is ready.
		testutil.Until(t, readyTimeout, "memory ready", func() bool {
			pid, _, _ := rwServerStatus(t, d, "memory")
			return pid != 0
		})
		pid, _, clients := rwServerStatus(t, d, "memory")
		assert.NotZero(t, pid)
		assert.Len(t, clients, 3, "sessions of memory: %v", clients)
		for _, n := range []string{"memory-connect", "memory-ws", "memory-yamux"} {
			assert.Contains(t, clients, n)
		}
		transports := map[string]bool{}
		for _, tr := range clients {
			transports[tr] = true
		}
		assert.Len(t, transports, 3, "three transports: %v", clients)
	})

	created := entity{Name: ent, EntityType: "test", Observations: []string{"created over mcpmux connect"}}
	assert.Equal(t, []entity{created}, r.BOpens.Entities, "the WebSocket client reads what the connect client created")
	assert.Equal(t, []entity{created}, r.CSearches.Entities, "the yamux client finds it")

	want := graph{
		Entities: []entity{
			{Name: ent, EntityType: "test", Observations: []string{"created over mcpmux connect", "added over WebSocket"}},
			{Name: other, EntityType: "test", Observations: []string{"created over yamux"}},
		},
		Relations: []relation{{From: other, To: ent, RelationType: "shares a server with"}},
	}
	assert.Subset(t, r.AReads.Entities, want.Entities, "the connect client reads everyone's writes")
	assert.Subset(t, r.AReads.Relations, want.Relations)
	assert.ElementsMatch(t, want.Entities, r.BOpensBoth.Entities)
	assert.ElementsMatch(t, want.Relations, r.BOpensBoth.Relations)

	// Only the yamux client subscribed to the graph resource: it was told
	// of every write (two creates, an observation, a relation), the
	// others of none.
	uri := "memory://knowledge-graph"
	assert.Equal(t, []string{uri, uri, uri, uri}, r.Updates["c"])
	assert.Empty(t, r.Updates["a"])
	assert.Empty(t, r.Updates["b"])

	// A fourth client, raw JSON-RPC on the socket, sees the same graph.
	c := open(t, d.socket("memory"))
	m, err := c.tool(`"open"`, "open_nodes", map[string]any{"names": []string{ent, other}})
	require.NoError(t, err)
	var g graph
	require.NoError(t, decodeStructured(m, &g))
	assert.ElementsMatch(t, want.Entities, g.Entities)
	assert.ElementsMatch(t, want.Relations, g.Relations)

	oneProcess(t, d, "memory")

	// The server kept it in the file its env named.
	assert.Contains(t, mustRead(t, memoryFile), `"name":"`+ent+`"`)
}

// TestRealWorldFilesystem: server-filesystem started with one folder on its
// command line, and mcpmux configured with another as roots: the server
// takes mcpmux's roots, and lists, reads and writes under that root only.
func TestRealWorldFilesystem(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	base, err := os.MkdirTemp("", "mxfs")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	base, err = filepath.EvalSymlinks(base) // the server resolves symlinks (/tmp on macOS)
	require.NoError(t, err)
	root, decoy := filepath.Join(base, "root"), filepath.Join(base, "decoy")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o700))
	require.NoError(t, os.MkdirAll(decoy, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello from the root\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "nested.txt"), []byte("nested\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(decoy, "secret.txt"), []byte("secret\n"), 0o600))

	d := startDaemon(t, rw.server("fs", rwFilesystem, []string{decoy}, `roots = ["file://`+root+`"]`), "")

	var r struct {
		Allowed, List, Read, Nested, Write rwCall
		Denied                             map[string]rwCall `json:"denied"`
		RootsAsked                         int               `json:"rootsAsked"`
	}
	rw.runScript(t, "filesystem.mjs", map[string]any{
		"target": connectTarget(d, "fs"),
		"root":   root, "decoy": decoy, "decoyBase": "decoy",
	}, &r, nil)

	assert.Equal(t, "Allowed directories:\n"+root, r.Allowed.Text, "the configured root replaced the command line's folder")
	assert.False(t, r.List.IsError, r.List.Text)
	assert.Contains(t, r.List.Text, "[FILE] hello.txt")
	assert.Contains(t, r.List.Text, "[DIR] sub")
	assert.Equal(t, "hello from the root\n", r.Read.Text)
	assert.Equal(t, "nested\n", r.Nested.Text)
	assert.False(t, r.Write.IsError, r.Write.Text)
	assert.Equal(t, "written through mcpmux", mustRead(t, filepath.Join(root, "written.txt")))

	require.Len(t, r.Denied, 5)
	for what, c := range r.Denied {
		assert.True(t, c.IsError, "%s: %s", what, c.Text)
		assert.Contains(t, c.Text, "Access denied", what)
	}
	_, err = os.Stat(filepath.Join(decoy, "planted.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the server wrote outside the root")
	assert.Zero(t, r.RootsAsked, "mcpmux answers roots/list itself; the client was asked")
	assert.Contains(t, d.log(), "Updated allowed directories from MCP roots: 1 valid directories", "the server's stderr, in the daemon's log")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestRealWorldMemoryConcurrency: server-memory is not safe under
// concurrent calls (each reads its file, adds, writes it back); three
// clients creating entities at the same moment through one shared process
// keep every entity with max_concurrency = 1. Without it they may lose
// some: that count is logged, not asserted (it depends on timing).
func TestRealWorldMemoryConcurrency(t *testing.T) {
	rw := needRealWorld(t)
	dir := t.TempDir()
	d := startDaemon(t,
		rw.server("limited", rwMemory, nil, `env = { MEMORY_FILE_PATH = "`+filepath.Join(dir, "limited.jsonl")+`" }`, `max_concurrency = 1`)+
			rw.server("free", rwMemory, nil, `env = { MEMORY_FILE_PATH = "`+filepath.Join(dir, "free.jsonl")+`" }`), "")
	for _, name := range []string{"limited", "free"} {
		var got struct {
			Created []string `json:"created"`
			Kept    []string `json:"kept"`
		}
		rw.runScript(t, "memory-race.mjs", map[string]any{"target": connectTarget(d, name), "rounds": 5}, &got, nil)
		require.Len(t, got.Created, 15)
		if name == "limited" {
			assert.ElementsMatch(t, got.Created, got.Kept, "every entity kept with max_concurrency = 1")
		} else {
			t.Logf("without max_concurrency: %d of %d entities kept", len(got.Kept), len(got.Created))
		}
	}
}

// TestRealWorldSequentialThinkingSharing: server-sequential-thinking keeps
// one thought history per process. Shared, a second session's first
// thought is counted after the first session's three (its history is
// theirs); with share = "isolated" each session has its own.
func TestRealWorldSequentialThinkingSharing(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	d := startDaemon(t, rw.server("shared", rwThinking, nil, `env = { DISABLE_THOUGHT_LOGGING = "true" }`)+
		rw.server("isolated", rwThinking, nil, `env = { DISABLE_THOUGHT_LOGGING = "true" }`, `share = "isolated"`), "")
	think := func(c *client, n int) int {
		t.Helper()
		m, err := c.tool(fmt.Sprintf(`"t%d"`, n), "sequentialthinking", map[string]any{
			"thought": fmt.Sprintf("thought %d", n), "thoughtNumber": n, "totalThoughts": 3, "nextThoughtNeeded": n < 3,
		})
		require.NoError(t, err)
		text, err := resultText(m)
		require.NoError(t, err)
		var r struct {
			ThoughtHistoryLength int `json:"thoughtHistoryLength"`
		}
		require.NoError(t, json.Unmarshal([]byte(text), &r), text)
		return r.ThoughtHistoryLength
	}
	for name, want := range map[string]int{"shared": 4, "isolated": 1} {
		a, b := open(t, d.socket(name)), open(t, d.socket(name))
		for n := 1; n <= 3; n++ {
			think(a, n)
		}
		assert.Equal(t, want, think(b, 1), "%s: the history length a second session's first thought reports", name)
		a.close()
		b.close()
	}
}

// TestRealWorldSequentialThinkingIsolated: with share = "isolated", one
// client keeps one process, and so one thought history, in both eras and
// over both transports: three thoughts count 1, 2, 3 from a legacy client
// (TypeScript SDK v1) and from a 2026-07-28 client (SDK v2, pinned, whose
// requests over HTTP are each a session of their own), over `mcpmux
// connect` and over Streamable HTTP. Each client gets exactly one process,
// and it is gone once the client has left: at once for a connection,
// idle_timeout after its last request for a modern HTTP client, and when
// its HTTP session goes dormant for a legacy one (the SDK never deletes
// it).
func TestRealWorldSequentialThinkingIsolated(t *testing.T) {
	t.Parallel()
	rw := needRealWorld(t)
	const idle, dormant = time.Second, 2 * time.Second
	d := startDaemon(t, rw.server("think", rwThinking, nil, `env = { DISABLE_THOUGHT_LOGGING = "true" }`, `share = "isolated"`,
		fmt.Sprintf("idle_timeout = %q", idle)), rwListen+fmt.Sprintf("\nhttp_session_idle = %q", dormant))
	for _, tc := range []struct{ era, kind string }{
		{"legacy", "connect"}, {"legacy", "http"}, {"modern", "connect"}, {"modern", "http"},
	} {
		t.Run(tc.era+"-"+tc.kind, func(t *testing.T) {
			target := connectTarget(d, "think")
			if tc.kind == "http" {
				target = httpTarget(d, "think", rwToken, false)
			}
			before := len(startedPids(d, "think"))
			var pids []int
			var r struct {
				Era     string `json:"era"`
				Lengths []int  `json:"lengths"`
			}
			rw.runScript(t, "isolated-think.mjs", map[string]any{"era": tc.era, "name": "think-" + tc.era + "-" + tc.kind, "target": target}, &r,
				func(string) { pids = startedPids(d, "think")[before:] })
			assert.Equal(t, tc.era, r.Era)
			assert.Equal(t, []int{1, 2, 3}, r.Lengths, "the thought history's length after each thought")
			require.Len(t, pids, 1, "one process for the client")
			took := testutil.Eventually(t, dormant+idle+5*time.Second, "the client's process is gone", func() (bool, error) { return gone(pids[0]), nil })
			t.Logf("%s over %s: lengths %v, %d process (pid %d), gone %v after the client left", tc.era, tc.kind, r.Lengths, len(pids), pids[0], took.Round(time.Millisecond))
		})
	}
	assert.Len(t, startedPids(d, "think"), 4, "four clients, four processes")
}

var serverStarted = regexp.MustCompile(`msg="server started" server=(\S+) pid=(\d+)`)

// startedPids lists the processes the daemon has logged starting for a
// server, in order.
func startedPids(d *daemon, server string) []int {
	var pids []int
	for _, m := range serverStarted.FindAllStringSubmatch(d.log(), -1) {
		if m[1] == server {
			pid, _ := strconv.Atoi(m[2])
			pids = append(pids, pid)
		}
	}
	return pids
}
