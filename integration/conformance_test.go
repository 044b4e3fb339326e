package integration

// The conformance tier: the official MCP conformance suite, both pinned
// versions (0.1.16 and 0.2.0-alpha.12, see conformance_helpers_test.go),
// and 0.2.0-alpha.12's 2026-07-28 requirement set, run over Streamable
// HTTP against the go-sdk's conformance everything-server: on its own, as
// the baseline, and shared through mcpmux, by one process opened in each
// era (conformance_eras_test.go has what the server itself cannot do for
// clients of the other era). What the suite checks of a server, mcpmux
// must not take away.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// confToken is the http_token of the tier's daemon; the suite takes only a
// URL, so the token goes on it.
const confToken = "conformance-token"

// confTapEnv names a variable that may hold a folder: the daemon then runs
// each conformance server behind ./eratap, which logs the hop from mcpmux
// to the server there (conf.log, confnext.log), to find why a scenario
// fails through mcpmux and not directly.
const confTapEnv = "MCPMUX_CONFORMANCE_TAP"

// confOpened are the daemon's two processes of the conformance server: one
// opened legacy (initialize, the default for a server of both eras) and
// one opened modern (server/discover, protocol = "modern"), by name.
var confOpened = []struct {
	name, target, config string
	modern               bool
}{
	{"conf", confLegacyOpened, "server_requests = \"serialize\"\nprotocol = \"legacy\"\n", false},
	{"confnext", confModernOpened, "server_requests = \"serialize\"\nprotocol = \"modern\"\n", true},
}

// TestConformance runs each suite against the conformance server on its
// own, as the baseline, and through mcpmux against each of two processes
// of the same binary over stdio: one opened legacy, one opened modern. The
// legacy suites (0.1.16 and 0.2.0-alpha.12, default suite) run directly
// against the server over stateful Streamable HTTP and, through mcpmux,
// over the daemon's 2025 binding; the 2026-07-28 requirement set runs
// directly against the server over stateless HTTP and, through mcpmux,
// over the daemon's sessionless binding on the same URL scheme. So each
// suite meets one process of its own era and one of the other, whose
// sessions the era bridge carries: a legacy session's initialize is
// answered by mcpmux and its capabilities go up in each request's _meta;
// a modern session's input_required rounds become the legacy server's
// sampling and elicitation requests and back. Both processes run with
// server_requests = "serialize", so that every sampling and elicitation
// request goes back to the very session whose tool call caused it.
//
// Through mcpmux every scored scenario must pass, dns-rebinding-protection
// included and with no baseline of expected failures; the scenarios must be
// the ones run directly, and none that passes directly may fail through
// mcpmux, whichever era the process was opened in, but for those the
// server itself, opened in that era, does not serve a client of the other
// era, as measured directly over stdio in this run (confServerOwn). Then every suite runs
// at once against each process, and every scenario of each must pass
// again. Each process serves every run without a restart: its pid does not
// change.
func TestConformance(t *testing.T) {
	t.Parallel()
	conf := needConformance(t)
	srv := needGoPeers(t)

	direct := map[bool]string{false: startConfDirect(t, srv, false), true: startConfDirect(t, srv, true)}
	d, muxed, before := startConfDaemon(t, srv)
	own := map[string]map[string]string{}
	for _, o := range confOpened {
		own[o.name] = confServerOwn(t, srv, o.modern)
		t.Logf("the server itself, opened %s over stdio, does not serve clients of the other era in: %v", map[bool]string{false: "legacy", true: "modern"}[o.modern], own[o.name])
	}

	tables := confTables{}
	for _, s := range confSuites {
		t.Run(s.label(), func(t *testing.T) {
			base := mustRunSuite(t, conf, s, "direct", direct[s.modern()])
			tables.put(s, "direct", base)
			if f := base.failures(); len(f) > 0 {
				// Not asserted: the go-sdk server's own failures are not
				// mcpmux's, but they would explain a short table.
				t.Logf("suite %s: failing directly (the go-sdk server's own):\n  %s", s.label(), strings.Join(f, "\n  "))
			}
			assert.GreaterOrEqual(t, len(base.scenarios), confMinScenarios, "scenarios run directly: %v", base.names())
			for _, o := range confOpened {
				mux := mustRunSuite(t, conf, s, o.target, muxed[o.name])
				tables.put(s, o.target, mux)
				t.Logf("suite %s: direct %v; through mcpmux, %s: %v", s.label(), base, o.target, mux)
				assertAsDirect(t, s, o.target, base, mux, excused(s, o.modern, own[o.name]))
			}
		})
	}

	for _, o := range confOpened {
		t.Run("all runs at once, "+o.target, func(t *testing.T) {
			confAllAtOnce(t, conf, muxed[o.name], o.target, tables, func(s confSuite) map[string]string { return excused(s, o.modern, own[o.name]) })
		})
	}

	t.Run("latency", func(t *testing.T) { confLatencies(t, muxed) })

	for _, o := range confOpened {
		assertSameProcess(t, d, o.name, before[o.name])
	}

	t.Logf("conformance summary (scenarios passed/run, checks passed, duration):\n%s", tables.compact())
	if len(tables) == len(confSuites) {
		if path := os.Getenv(confSummaryEnv); path != "" {
			require.NoError(t, os.WriteFile(path, []byte(tables.markdown()), 0o644), "%s=%s", confSummaryEnv, path)
		}
	}
}

// startConfDaemon starts a daemon that runs the conformance server srv
// twice, once opened in each era (confOpened), waits for both, and returns
// the URL of each through the daemon's HTTP front and each one's status.
func startConfDaemon(t *testing.T, srv string) (*daemon, map[string]string, map[string]gpStatus) {
	t.Helper()
	var servers strings.Builder
	tapDir, tap := os.Getenv(confTapEnv), ""
	if tapDir != "" {
		var err error
		_, tap, err = eraBuild()
		require.NoError(t, err)
	}
	for _, o := range confOpened {
		if tapDir == "" {
			servers.WriteString(gpServer(o.name, srv) + o.config + "\n")
			continue
		}
		fmt.Fprintf(&servers, "[servers.%s]\ncommand = %q\nargs = [%q, %q]\n%s\n", o.name, tap, filepath.Join(tapDir, o.name+".log"), srv, o.config)
	}
	d := startDaemon(t, servers.String(), "http = \"127.0.0.1:0\"\nhttp_token = \""+confToken+"\"")
	muxed := map[string]string{}
	before := map[string]gpStatus{}
	for _, o := range confOpened {
		muxed[o.name] = "http://" + d.webAddr() + "/servers/" + o.name + "?token=" + confToken
		testutil.Eventually(t, readyTimeout, "server "+o.name+" is ready", func() (bool, error) {
			before[o.name] = gpServerStatus(t, d, o.name)
			return before[o.name].State == "ready", fmt.Errorf("state %s", before[o.name].State)
		})
		require.NotZero(t, before[o.name].Pid)
	}
	return d, muxed, before
}

// assertAsDirect asserts that suite s through mcpmux (target) passed every
// scored scenario, ran the scenarios run directly (base), and lost none
// that passes directly.
func assertAsDirect(t *testing.T, s confSuite, target string, base, mux confResult, excused map[string]string) {
	t.Helper()
	assert.Empty(t, mux.failuresBut(excused), "suite %s through mcpmux, %s: the failing checks (scenario: check: error)", s.label(), target)
	assert.Equal(t, base.names(), mux.names(), "suite %s: the scenarios run through mcpmux, %s, against those run directly", s.label(), target)
	var lost []string
	for _, name := range base.names() {
		if base.passes(name) && !mux.passes(name) {
			if why, ok := excused[name]; ok {
				t.Logf("suite %s through mcpmux, %s: %s fails as on the server itself, opened so: %s", s.label(), target, name, why)
				continue
			}
			lost = append(lost, name)
		}
	}
	assert.Empty(t, lost, "suite %s: scenarios that pass directly and fail through mcpmux, %s", s.label(), target)
	if len(mux.unscored) > 0 {
		t.Logf("suite %s: run and not scored: direct %d/%d pass, through mcpmux, %s, %d/%d", s.label(),
			confPassing(base.unscored), len(base.unscored), target, confPassing(mux.unscored), len(mux.unscored))
	}
}

// confAllAtOnce runs every suite at once against one process (url, opened
// as target says), and asserts each passes every scored scenario, as it did
// alone.
func confAllAtOnce(t *testing.T, conf *conformance, url, target string, tables confTables, excusedFor func(confSuite) map[string]string) {
	results := make([]confResult, len(confSuites))
	errs := make([]error, len(confSuites))
	dirs := make([]string, len(confSuites))
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	var wg sync.WaitGroup
	for i, s := range confSuites {
		wg.Go(func() { results[i], errs[i] = conf.runSuite(s, target, url, dirs[i]) })
	}
	wg.Wait()
	for i, s := range confSuites {
		r := results[i]
		if !assert.NoError(t, errs[i], "suite %s; its output:\n%s", s.label(), r.output) {
			continue
		}
		alone, found := tables[s.label()][target]
		tables.put(s, confBoth(target), r)
		t.Logf("suite %s through mcpmux, %s, alongside the others: %v", s.label(), target, r)
		ok := assert.GreaterOrEqual(t, len(r.scenarios), confMinScenarios, "suite %s: scenarios run: %v", s.label(), r.names())
		ok = assert.Empty(t, r.failuresBut(excusedFor(s)), "suite %s alongside the others, %s: the failing checks (scenario: check: error)", s.label(), target) && ok
		if found {
			ok = assert.Equal(t, alone.names(), r.names(), "suite %s, %s: the scenarios run alongside the others, against those run alone", s.label(), target) && ok
		}
		if !ok {
			t.Logf("output of suite %s:\n%s", s.label(), r.output)
		}
	}
}

// confLatencies times a client of each era through mcpmux to each
// process (measureConfLatency). Not asserted beyond working: the figures
// decide, in docs/PROTOCOL.md, which era a server of both is opened in.
func confLatencies(t *testing.T, muxed map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), confRunTimeout)
	defer cancel()
	eraName := map[bool]string{false: "legacy", true: "modern"}
	for _, o := range confOpened {
		for _, modern := range []bool{false, true} {
			l, err := measureConfLatency(ctx, muxed[o.name], modern)
			if assert.NoError(t, err, "%s client, %s", eraName[modern], o.target) {
				l.opened = eraName[o.modern]
				t.Logf("latency through mcpmux: %v", l)
			}
		}
	}
}

// assertSameProcess asserts that server name is ready in the process it
// had before (its status then: before), never restarted.
func assertSameProcess(t *testing.T, d *daemon, name string, before gpStatus) {
	after := gpServerStatus(t, d, name)
	assert.Equal(t, "ready", after.State, name)
	assert.Equal(t, before.Pid, after.Pid, "one process of %s served every run", name)
	assert.Zero(t, after.Restarts, "%s never restarted", name)
}

// excused is what suite s may fail through mcpmux on a process opened in
// the era modern says, for the server's own reasons (own, measured by
// confServerOwn): nothing on a process of the suite's own era.
func excused(s confSuite, modern bool, own map[string]string) map[string]string {
	if s.modern() == modern {
		return nil
	}
	return own
}

// confPassing counts the scenarios of which no check failed.
func confPassing(scenarios map[string][]confCheck) int {
	n := 0
	for _, checks := range scenarios {
		if !slices.ContainsFunc(checks, failed) {
			n++
		}
	}
	return n
}

// mustRunSuite runs suite s against url in a folder of the test's own and
// fails the test if the run itself broke; the suite's output is logged when
// the test fails.
func mustRunSuite(t *testing.T, conf *conformance, s confSuite, target, url string) confResult {
	t.Helper()
	r, err := conf.runSuite(s, target, url, t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("output of suite %s against %s:\n%s", s.label(), target, r.output)
		}
	})
	require.NoError(t, err, "suite %s against %s", s.label(), target)
	return r
}
