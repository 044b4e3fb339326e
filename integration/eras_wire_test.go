package integration

// How the era tier judges a cell: from the wire. The era a hop ran is read
// off its messages (eraView), never taken from what an SDK says about
// itself; then the opening (server/discover answered, or initialize), the
// era's own way of doing each feature (MRTR or server requests, listens or
// resources/subscribe, the per-request log level or logging/setLevel), the
// cancel, and the server's side of the same connection as its tap logged it.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/protocol"
)

// eraWant is what a cell must show.
type eraWant struct {
	era  string // the era the client ends in; "" when it cannot connect
	fail string // then: a part of its connect error ("[CODE] message")
}

func (w eraWant) String() string {
	if w.era == "" {
		return "fails: " + w.fail
	}
	return w.era + " 9/9"
}

// eraWantDirect is the direct matrix (shared/research/modern-era.md §1): a
// client that can fall back does so against a legacy-only server; a
// modern-capable one runs modern against every server that serves the
// modern era; a modern-only client cannot reach a legacy-only server, nor a
// legacy-only client a modern-only server.
func eraWantDirect(c eraClient, s eraServer) eraWant {
	switch {
	case s.class == "legacy" && c.mode == "pin":
		return eraWant{fail: "[ERA_NEGOTIATION_FAILED] Version negotiation failed: the server did not offer pinned protocol version 2026-07-28"}
	case s.class == "legacy" || c.mode == "legacy":
		if s.class == "modern-only" {
			return eraWant{fail: "[-32022] Unsupported protocol version: 2025-11-25"}
		}
		return eraWant{era: eraLegacy}
	}
	return eraWant{era: eraModern}
}

// eraView is what one hop's messages say about its era.
type eraView struct {
	discover   string   // "" (none sent), "result", or "error CODE"
	versions   []string // the supportedVersions of a discover result
	initialize string   // "" (none sent), the version the answer chose, or "error CODE"
	requests   int      // requests the client sent besides server/discover and initialize
	enveloped  int      // how many of those carry the 2026-07-28 _meta envelope
}

func eraViewOf(msgs []gpMsg) eraView {
	var v eraView
	answers := map[string]gpMsg{}
	for _, m := range msgs {
		if !m.Out && m.isResponse() {
			answers[string(m.ID)] = m
		}
	}
	for _, m := range msgs {
		if !m.Out || !m.isRequest() {
			continue
		}
		a, answered := answers[string(m.ID)]
		switch m.Method {
		case "server/discover":
			v.discover = eraOutcome(a, answered)
			if v.discover == "result" {
				var r struct {
					SupportedVersions []string `json:"supportedVersions"`
				}
				json.Unmarshal(a.Result, &r)
				v.versions = r.SupportedVersions
			}
		case "initialize":
			v.initialize = eraOutcome(a, answered)
			if v.initialize == "result" {
				var r struct {
					ProtocolVersion string `json:"protocolVersion"`
				}
				json.Unmarshal(a.Result, &r)
				v.initialize = r.ProtocolVersion
			}
		default:
			v.requests++
			if eraEnveloped(m) {
				v.enveloped++
			}
		}
	}
	return v
}

func eraOutcome(a gpMsg, answered bool) string {
	switch {
	case !answered:
		return "unanswered"
	case a.Error != nil:
		return fmt.Sprintf("error %d", a.Error.Code)
	}
	return "result"
}

// era is the era the hop ran: legacy after an answered initialize; modern
// when it carried requests, all with the envelope, and no initialize;
// "probe" when it carried a server/discover only; "legacy requests" for
// requests without the envelope on a connection opened before the messages
// at hand.
func (v eraView) era() string {
	switch {
	case v.initialize != "" && !strings.HasPrefix(v.initialize, "error") && v.initialize != "unanswered":
		if v.initialize >= eraModernVersion {
			return "initialize chose " + v.initialize
		}
		return eraLegacy
	case v.initialize == "" && v.requests > 0 && v.enveloped == v.requests:
		return eraModern
	case v.initialize == "" && v.requests == 0 && v.discover != "":
		return "probe"
	case strings.HasPrefix(v.initialize, "error") && v.discover == "result" && v.requests > 0 && v.enveloped == v.requests:
		// initialize refused, then server/discover: how mcpmux opens a
		// server that speaks 2026-07-28 only.
		return eraModern
	case v.requests == 0 && v.initialize != "":
		return "refused (initialize: " + v.initialize + ")"
	case v.initialize == "" && v.discover == "" && v.requests > 0 && v.enveloped == 0:
		// Part of a connection opened earlier (a shared upstream's log from an offset).
		return "legacy requests"
	}
	return fmt.Sprintf("none (%+v)", v)
}

// eraEnveloped says whether a request carries the modern _meta envelope:
// in 2026-07-28, or in a legacy revision that a server of both eras listed
// in its supportedVersions (mcpmux sends a legacy session's requests so).
func eraEnveloped(m gpMsg) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(m.Params, &p)
	var v string
	json.Unmarshal(p.Meta["io.modelcontextprotocol/protocolVersion"], &v)
	return v == eraModernVersion || protocol.IsLegacy(v)
}

// eraToken is the raw progressToken of a notification or request.
func eraToken(m gpMsg) string {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
		Meta  struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	json.Unmarshal(m.Params, &p)
	if p.Token != nil {
		return string(p.Token)
	}
	return string(p.Meta.Token)
}

// eraSubscriptionID is the raw subscription id a notification carries.
func eraSubscriptionID(m gpMsg) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(m.Params, &p)
	return string(p.Meta["io.modelcontextprotocol/subscriptionId"])
}

// eraHops splits a report's wire by hop, in the order the hops began.
func eraHops(rep eraReport) (names []string, msgs map[string][]gpMsg) {
	msgs = map[string][]gpMsg{}
	for _, w := range rep.Wire {
		if _, ok := msgs[w.Hop]; !ok {
			names = append(names, w.Hop)
		}
		msgs[w.Hop] = append(msgs[w.Hop], eraParse(w.Msg, w.Dir == "out"))
	}
	return names, msgs
}

func eraDump(msgs []gpMsg) string {
	var b strings.Builder
	for _, m := range msgs {
		dir := "<-"
		if m.Out {
			dir = "->"
		}
		fmt.Fprintf(&b, "  %s %.400s\n", dir, m.Raw)
	}
	return b.String()
}

// eraAssertCell asserts a cell against want, from the client's wire; with
// serverHops, also from the server processes' taps (direct cells: the same
// connection seen from the other end).
func eraAssertCell(t *testing.T, cell *eraCell, want eraWant, serverHops bool) {
	t.Helper()
	rep := cell.report
	if want.era == "" {
		eraAssertFailed(t, cell, want)
		if serverHops {
			names, hops := eraHops(rep)
			eraAssertSameHops(t, cell, names, hops)
		}
		return
	}
	require.True(t, rep.Connected, "%s must connect: %+v", cell, rep.ConnectError)
	assert.Equal(t, want.era, rep.Era, "%s: the era the client reports", cell)
	eraAssertChecks(t, cell)
	names, hops := eraHops(rep)
	session := hops["session"]
	require.NotEmpty(t, session, "%s: no session messages", cell)
	require.Equal(t, want.era, eraViewOf(session).era(), "%s: the era of the session hop, from its wire:\n%s", cell, eraDump(session))
	eraAssertOpening(t, cell, want, names, hops)
	if want.era == eraModern {
		eraAssertModern(t, cell, session)
	} else {
		eraAssertLegacy(t, cell, session)
	}
	eraAssertCancel(t, cell, session)
	if serverHops {
		eraAssertServerHops(t, cell, names, hops)
	}
}

func eraAssertFailed(t *testing.T, cell *eraCell, want eraWant) {
	t.Helper()
	rep := cell.report
	require.False(t, rep.Connected, "%s must not connect; it ran %s", cell, rep.Era)
	require.NotNil(t, rep.ConnectError, "%s: no connect error reported", cell)
	code := strings.Trim(string(rep.ConnectError.Code), `"`)
	assert.Contains(t, fmt.Sprintf("[%s] %s", code, rep.ConnectError.Message), want.fail, "%s: the connect error", cell)
	_, hops := eraHops(rep)
	for name, msgs := range hops {
		for _, m := range msgs {
			if m.Out && m.isRequest() {
				assert.Contains(t, []string{"server/discover", "initialize"}, m.Method, "%s: hop %s carried more than an opening", cell, name)
			}
		}
	}
}

// eraAssertChecks: all nine checks ran and passed.
func eraAssertChecks(t *testing.T, cell *eraCell) {
	t.Helper()
	var names []string
	for _, c := range cell.report.Checks {
		names = append(names, c.Name)
		assert.True(t, c.Pass, "%s: check %s failed: %s", cell, c.Name, c.Detail)
	}
	assert.Equal(t, eraCheckNames, names, "%s: the checks that ran", cell)
}

// eraAssertOpening: how the client opened. A probing client's first
// message is server/discover: answered with 2026-07-28 among its versions
// and no initialize anywhere (modern), or refused and followed by initialize
// (legacy). A legacy client never probes. A legacy opening is initialize
// with 2025-11-25, answered with it, then notifications/initialized.
func eraAssertOpening(t *testing.T, cell *eraCell, want eraWant, names []string, hops map[string][]gpMsg) {
	t.Helper()
	first := hops[names[0]][0]
	var discover eraView
	for _, name := range names {
		if v := eraViewOf(hops[name]); v.discover != "" {
			discover = v
		}
	}
	if !cell.client.probes() {
		assert.Equal(t, "initialize", first.Method, "%s: a legacy client opens with initialize: %s", cell, first.Raw)
		assert.Empty(t, discover.discover, "%s: a legacy client sends no server/discover", cell)
	} else {
		assert.Equal(t, "server/discover", first.Method, "%s: the first message: %s", cell, first.Raw)
	}
	for _, name := range names {
		if want.era == eraModern {
			assert.Empty(t, eraViewOf(hops[name]).initialize, "%s: hop %s sent initialize on a modern connection", cell, name)
		}
	}
	if want.era == eraModern {
		assert.Equal(t, "result", discover.discover, "%s: server/discover", cell)
		assert.Contains(t, discover.versions, eraModernVersion, "%s: the versions server/discover offered", cell)
		return
	}
	if cell.client.probes() {
		assert.True(t, strings.HasPrefix(discover.discover, "error"), "%s: a fallback follows a refused server/discover, not %q", cell, discover.discover)
	}
	session := hops["session"]
	init := eraFirst(session, func(m gpMsg) bool { return m.Out && m.Method == "initialize" })
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	json.Unmarshal(init.Params, &p)
	assert.Equal(t, eraLegacyVersion, p.ProtocolVersion, "%s: the version initialize asked for", cell)
	assert.Equal(t, eraLegacyVersion, eraViewOf(session).initialize, "%s: the version initialize was answered with", cell)
	assert.NotEmpty(t, eraAll(session, func(m gpMsg) bool { return m.Out && m.Method == "notifications/initialized" }),
		"%s: no notifications/initialized", cell)
}

// eraAssertModern: the modern era's features on the session hop.
func eraAssertModern(t *testing.T, cell *eraCell, session []gpMsg) {
	t.Helper()
	for _, mr := range []struct{ tool, key, method string }{{"confirm", "confirm", "elicitation/create"}, {"sample", "llm", "sampling/createMessage"}} {
		eraAssertMRTR(t, cell, session, mr.tool, mr.key, mr.method)
	}
	assert.Empty(t, eraAll(session, func(m gpMsg) bool { return !m.Out && m.isRequest() }),
		"%s: a modern server sends no requests", cell)
	for _, gone := range []string{"logging/setLevel", "resources/subscribe", "initialize", "ping"} {
		assert.Empty(t, eraAll(session, func(m gpMsg) bool { return m.Out && m.Method == gone }), "%s: %s sent on a modern connection", cell, gone)
	}
	logCall := eraFirst(session, eraCallOf("log"))
	assert.Contains(t, string(logCall.Params), `"io.modelcontextprotocol/logLevel":"debug"`, "%s: the log call's own level", cell)

	listen := eraFirst(session, func(m gpMsg) bool {
		return m.Out && m.Method == "subscriptions/listen" && strings.Contains(string(m.Params), eraResource)
	})
	require.NotEmpty(t, listen.Raw, "%s: no subscriptions/listen for %s:\n%s", cell, eraResource, eraDump(session))
	id := string(listen.ID)
	ack := eraAll(session, func(m gpMsg) bool {
		return m.Method == "notifications/subscriptions/acknowledged" && eraSubscriptionID(m) == id
	})
	assert.NotEmpty(t, ack, "%s: the listen %s was not acknowledged", cell, id)
	updated := eraAll(session, func(m gpMsg) bool {
		return m.Method == "notifications/resources/updated" && eraSubscriptionID(m) == id
	})
	assert.NotEmpty(t, updated, "%s: no resources/updated on the listen %s", cell, id)

	list := eraFirst(session, func(m gpMsg) bool { return m.Out && m.Method == "tools/list" })
	if a, ok := eraAnswer(session, list.ID); assert.True(t, ok, "%s: tools/list unanswered", cell) {
		assert.Contains(t, string(a.Result), `"resultType":"complete"`, "%s: a modern result names its type", cell)
	}
}

// eraAssertMRTR: tool asked for input through an input_required result
// (key: method), and the retry, a new request with the answer under key and
// the request state, completed.
func eraAssertMRTR(t *testing.T, cell *eraCell, session []gpMsg, tool, key, method string) {
	t.Helper()
	calls := eraAll(session, eraCallOf(tool))
	require.Len(t, calls, 2, "%s: %s takes two rounds on the modern era:\n%s", cell, tool, eraDump(session))
	first, _ := eraAnswer(session, calls[0].ID)
	var r struct {
		ResultType    string `json:"resultType"`
		RequestState  string `json:"requestState"`
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
	}
	json.Unmarshal(first.Result, &r)
	assert.Equal(t, "input_required", r.ResultType, "%s: %s's first answer: %s", cell, tool, first.Raw)
	// The server's own round (direct, or a modern server through mcpmux)
	// has the server's key and state; through mcpmux's bridge from a legacy
	// server the one input request and its state are mcpmux's.
	bridged := strings.HasPrefix(r.RequestState, "mcpmux1.")
	if bridged {
		require.Len(t, r.InputRequests, 1, "%s: %s: one input request, from the server's one request: %s", cell, tool, first.Raw)
		for k := range r.InputRequests {
			key = k
		}
	}
	assert.Equal(t, method, r.InputRequests[key].Method, "%s: %s's input request", cell, tool)
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   string                     `json:"requestState"`
	}
	json.Unmarshal(calls[1].Params, &p)
	assert.NotEqual(t, string(calls[0].ID), string(calls[1].ID), "%s: %s's retry is a new request", cell, tool)
	assert.Contains(t, p.InputResponses, key, "%s: %s's retry: %s", cell, tool, calls[1].Raw)
	assert.Equal(t, r.RequestState, p.RequestState, "%s: %s's retry echoes the request state", cell, tool)
	if !bridged {
		assert.Equal(t, "round-1", p.RequestState, "%s: %s's request state is the server's", cell, tool)
	}
	second, _ := eraAnswer(session, calls[1].ID)
	assert.Contains(t, string(second.Result), `"resultType":"complete"`, "%s: %s's second answer: %s", cell, tool, second.Raw)
}

// eraAssertLegacy: the legacy era's features on the session hop.
func eraAssertLegacy(t *testing.T, cell *eraCell, session []gpMsg) {
	t.Helper()
	assert.Equal(t, 0, eraViewOf(session).enveloped, "%s: a legacy client sends no envelope", cell)
	for _, method := range []string{"elicitation/create", "sampling/createMessage"} {
		req := eraFirst(session, func(m gpMsg) bool { return !m.Out && m.isRequest() && m.Method == method })
		if !assert.NotEmpty(t, req.Raw, "%s: no %s from the server:\n%s", cell, method, eraDump(session)) {
			continue
		}
		answer := eraFirst(session, func(m gpMsg) bool { return m.Out && m.isResponse() && string(m.ID) == string(req.ID) })
		assert.NotEmpty(t, answer.Result, "%s: the client's answer to %s: %s", cell, method, answer.Raw)
	}
	assert.Empty(t, eraAll(session, func(m gpMsg) bool {
		return !m.Out && m.isResponse() && strings.Contains(string(m.Result), `"input_required"`)
	}), "%s: no input_required result on the legacy era", cell)
	for _, method := range []string{"logging/setLevel", "resources/subscribe"} {
		req := eraFirst(session, func(m gpMsg) bool { return m.Out && m.isRequest() && m.Method == method })
		a, ok := eraAnswer(session, req.ID)
		assert.True(t, ok && a.Error == nil, "%s: %s: %s -> %s", cell, method, req.Raw, a.Raw)
	}
	assert.NotEmpty(t, eraAll(session, func(m gpMsg) bool {
		return m.Method == "notifications/resources/updated" && strings.Contains(string(m.Params), eraResource)
	}), "%s: no resources/updated", cell)
}

// eraAssertCancel: notifications/cancelled named the slow call (except on
// modern Streamable HTTP, where closing the call's stream is the cancel),
// and a TypeScript server left it unanswered.
func eraAssertCancel(t *testing.T, cell *eraCell, session []gpMsg) {
	t.Helper()
	slow := eraFirst(session, eraCallOf("slow"))
	require.NotEmpty(t, slow.Raw, "%s: slow was not called", cell)
	if cell.server.ts {
		// The TypeScript SDK answers nothing once a request is cancelled (the
		// go-sdk sends its handler's error, which the client drops).
		a, answered := eraAnswer(session, slow.ID)
		assert.False(t, answered, "%s: the cancelled slow call was answered: %s", cell, a.Raw)
	}
	if cell.reach == eraHTTP && cell.report.Era == eraModern {
		return
	}
	note := eraAll(session, func(m gpMsg) bool {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		json.Unmarshal(m.Params, &p)
		return m.Out && m.Method == "notifications/cancelled" && string(p.RequestID) == string(slow.ID)
	})
	assert.Len(t, note, 1, "%s: notifications/cancelled for the slow call %s", cell, slow.ID)
}

// eraAssertServerHops checks the server processes' side: the same
// messages as the client's hops (eraAssertSameHops), so the same era; and
// the session's server saw the cancel (it says "slow cancelled" on stderr).
func eraAssertServerHops(t *testing.T, cell *eraCell, names []string, hops map[string][]gpMsg) {
	t.Helper()
	eraAssertSameHops(t, cell, names, hops)
	session := cell.hops[len(cell.hops)-1]
	assert.True(t, slices.ContainsFunc(session.stderr, func(l string) bool { return strings.Contains(l, "slow cancelled") }),
		"%s: the server did not report the cancel; its stderr: %q", cell, session.stderr)
}

// eraAssertSameHops: one server process per client hop, in the same order,
// each of which got exactly what its hop sent and sent all its hop received
// (the client may close before reading the last notifications). Messages
// are compared as sets: a client's recorder may log two messages written
// at once by two goroutines in either order.
func eraAssertSameHops(t *testing.T, cell *eraCell, names []string, hops map[string][]gpMsg) {
	t.Helper()
	require.Len(t, cell.hops, len(names), "%s: server processes (one per client hop %v)", cell, names)
	for i, name := range names {
		server, client := cell.hops[i].msgs, hops[name]
		what := fmt.Sprintf("%s, hop %s", cell, name)
		sent, got := eraCanon(eraDir(client, true)), eraCanon(eraDir(server, true))
		assert.Equal(t, sent, got, "%s: what the server got is what the client sent", what)
		received, gave := eraCanon(eraDir(client, false)), eraCanon(eraDir(server, false))
		for m, n := range received {
			assert.LessOrEqual(t, n, gave[m], "%s: the client received what the server did not send: %s", what, m)
		}
		assert.Equal(t, eraViewOf(client).era(), eraViewOf(server).era(), "%s: the era at the server", what)
		assert.True(t, cell.hops[i].exited, "%s: the server process did not exit", what)
	}
}

// eraCanon counts messages by their canonical JSON (keys sorted).
func eraCanon(msgs []gpMsg) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		var v any
		if err := json.Unmarshal([]byte(m.Raw), &v); err != nil {
			out[m.Raw]++
			continue
		}
		b, _ := json.Marshal(v)
		out[string(b)]++
	}
	return out
}

func eraDir(msgs []gpMsg, out bool) []gpMsg {
	return eraAll(msgs, func(m gpMsg) bool { return m.Out == out })
}

func eraAll(msgs []gpMsg, pred func(gpMsg) bool) []gpMsg {
	var out []gpMsg
	for _, m := range msgs {
		if pred(m) {
			out = append(out, m)
		}
	}
	return out
}

func eraFirst(msgs []gpMsg, pred func(gpMsg) bool) gpMsg {
	if all := eraAll(msgs, pred); len(all) > 0 {
		return all[0]
	}
	return gpMsg{}
}

func eraAnswer(msgs []gpMsg, id json.RawMessage) (gpMsg, bool) {
	a := eraFirst(msgs, func(m gpMsg) bool { return !m.Out && m.isResponse() && string(m.ID) == string(id) })
	return a, a.Raw != ""
}

// eraCallOf matches the client's tools/call requests of tool.
func eraCallOf(tool string) func(gpMsg) bool {
	return func(m gpMsg) bool {
		var p struct {
			Name string `json:"name"`
		}
		json.Unmarshal(m.Params, &p)
		return m.Out && m.isRequest() && m.Method == "tools/call" && p.Name == tool
	}
}

// eraSummary is one line about a cell: the client's outcome, its checks,
// and the era of each hop at the client and at the server processes.
func eraSummary(cell *eraCell) string {
	rep := cell.report
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", cell)
	if !rep.Connected {
		code := ""
		if rep.ConnectError != nil {
			code = strings.Trim(string(rep.ConnectError.Code), `"`)
			fmt.Fprintf(&b, "fails [%s] %.160s", code, rep.ConnectError.Message)
		}
	} else {
		passed := 0
		var failed []string
		for _, c := range rep.Checks {
			if c.Pass {
				passed++
			} else {
				failed = append(failed, c.Name)
			}
		}
		fmt.Fprintf(&b, "%s %s, %d/%d", rep.Era, rep.ProtocolVersion, passed, len(eraCheckNames))
		if len(failed) > 0 {
			fmt.Fprintf(&b, " (failed: %s)", strings.Join(failed, ", "))
		}
	}
	names, hops := eraHops(rep)
	b.WriteString("; client hops:")
	for _, name := range names {
		fmt.Fprintf(&b, " %s=%s", name, eraViewOf(hops[name]).era())
	}
	b.WriteString("; server processes:")
	for _, h := range cell.hops {
		fmt.Fprintf(&b, " %s", eraViewOf(h.msgs).era())
	}
	return b.String()
}
