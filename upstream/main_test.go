//go:build unix

package upstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// modeEnv, when set, turns the test binary into a scripted MCP server;
// argEnv carries the mode's parameter (a count or a size).
const (
	modeEnv = "MCPMUX_TEST_SERVER"
	argEnv  = "MCPMUX_TEST_ARG"
)

// reaperArg, as the first argument, makes the test binary a reaper, as
// "__reaper" does the mcpmux binary; daemonEnv, when set, makes it a fake
// mcpmux that starts a server in that mode under a reaper (runFakeDaemon).
const (
	reaperArg = "__reaper"
	daemonEnv = "MCPMUX_TEST_DAEMON"
)

// patience bounds every wait for something a child process does.
const patience = 15 * time.Second

func TestMain(m *testing.M) {
	// First: a reaper runs with the server's environment, mode included.
	if len(os.Args) > 1 && os.Args[1] == reaperArg {
		os.Exit(upstream.RunReaper(os.Args[2:]))
	}
	if mode := os.Getenv(daemonEnv); mode != "" {
		os.Exit(runFakeDaemon(mode))
	}
	if mode := os.Getenv(modeEnv); mode != "" {
		os.Exit(runFakeServer(mode, os.Getenv(argEnv)))
	}
	testutil.Main(m)
}

// runFakeServer is the child side. Modes:
//
//	echo                answers each request with result {} under its id
//	junk-banner N       N junk lines, one valid notification, N junk lines again, then echo
//	junk-flood          junk lines until killed
//	huge N              echo, but method "big" is answered with an N-byte data string, id last
//	invalid             echo, but method "nan" is answered with a NaN, "latin1" with a Latin-1 byte
//	ignore-eof          echo, then stays alive after stdin EOF
//	ignore-term         ignores SIGTERM, echo, then stays alive after stdin EOF
//	grandchild          starts a grandchild (sleeper) in its group, prints its pid to stderr, echo
//	escaped-grandchild  the same, but the grandchild calls setsid and holds our stdout
//	stubborn            ignores SIGTERM and stdin EOF; starts two sleepers, one in its
//	                    group, one that calls setsid; prints "grandchild N",
//	                    "escaped N" and "parent N" (its parent's pid) to stderr; echo
//	pid                 answers each request with its pid and its parent's pid
//	sleeper             ignores SIGTERM and EOF, holds nothing, sleeps
//	no-read             reads nothing from stdin until SIGUSR1, then echo
//	env                 answers each request with its environment and working directory
//	stderr-lines N      writes "line 1".."line N" to stderr, then echo
//	stderr-long         5 lines, a 9000-byte line, "after long" to stderr, then echo
//	exit-3              exits with status 3
//	close-stdout        closes its stdout and stays alive
//	close-stdin         closes its stdin and stays alive
//
// Every mode that gets that far writes a test/ready notification first.
func runFakeServer(mode, arg string) int {
	n, _ := strconv.Atoi(arg)
	switch mode {
	case "echo":
		ready()
		return echo(answerEmpty)
	case "junk-banner":
		for i := range n {
			fmt.Printf("banner line %d: starting up\n", i)
		}
		fmt.Println(`{"jsonrpc":"2.0","method":"test/between"}`)
		for range n {
			fmt.Println(`{"not":"jsonrpc"}`)
		}
		ready()
		return echo(answerEmpty)
	case "junk-flood":
		line := "junk " + strings.Repeat("j", 300) + "\n"
		for {
			if _, err := os.Stdout.WriteString(line); err != nil {
				return 1
			}
		}
	case "invalid":
		ready()
		return echo(func(id json.RawMessage, method string) string {
			switch method {
			case "nan":
				return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"x":NaN}}`
			case "latin1":
				return "{\"jsonrpc\":\"2.0\",\"id\":" + string(id) + ",\"result\":{\"text\":\"caf\xe9\"}}"
			}
			return answerEmpty(id, method)
		})
	case "huge":
		ready()
		return echo(func(id json.RawMessage, method string) string {
			if method == "big" {
				return hugeAnswer(string(id), n)
			}
			return answerEmpty(id, method)
		})
	case "ignore-eof":
		ready()
		echo(answerEmpty)
		sleepForever()
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		ready()
		echo(answerEmpty)
		sleepForever()
	case "grandchild", "escaped-grandchild":
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cmd := exec.Command(exe)
		cmd.Env = []string{modeEnv + "=sleeper"}
		if mode == "escaped-grandchild" {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			cmd.Stdout = os.Stdout
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "grandchild %d\n", cmd.Process.Pid)
		ready()
		return echo(answerEmpty)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, kind := range []string{"grandchild", "escaped"} {
			cmd := exec.Command(exe)
			cmd.Env = []string{modeEnv + "=sleeper"}
			if kind == "escaped" {
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			}
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Fprintf(os.Stderr, "%s %d\n", kind, cmd.Process.Pid)
		}
		fmt.Fprintf(os.Stderr, "parent %d\n", os.Getppid())
		ready()
		echo(answerEmpty)
		sleepForever()
	case "pid":
		ready()
		return echo(func(id json.RawMessage, _ string) string {
			result, _ := json.Marshal(pidResult{Pid: os.Getpid(), Ppid: os.Getppid()})
			return string(jsonrpc.Response(id, result))
		})
	case "sleeper":
		signal.Ignore(syscall.SIGTERM)
		sleepForever()
	case "no-read":
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		ready()
		<-usr1
		return echo(answerEmpty)
	case "env":
		ready()
		return echo(func(id json.RawMessage, _ string) string {
			wd, _ := os.Getwd()
			result, _ := json.Marshal(envResult{Env: os.Environ(), Dir: wd})
			return string(jsonrpc.Response(id, result))
		})
	case "stderr-lines":
		for i := 1; i <= n; i++ {
			fmt.Fprintf(os.Stderr, "line %d\n", i)
		}
		ready()
		return echo(answerEmpty)
	case "stderr-long":
		for i := 1; i <= 5; i++ {
			fmt.Fprintf(os.Stderr, "line %d\n", i)
		}
		fmt.Fprintf(os.Stderr, "%s\nafter long\n", strings.Repeat("x", 9000))
		ready()
		return echo(answerEmpty)
	case "exit-3":
		return 3
	case "close-stdout":
		ready()
		os.Stdout.Close()
		sleepForever()
	case "close-stdin":
		os.Stdin.Close()
		ready()
		sleepForever()
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	return 2
}

type pidResult struct {
	Pid  int `json:"pid"`
	Ppid int `json:"ppid"`
}

// runFakeDaemon plays mcpmux for the orphan test: it starts a server in
// the given mode (one that prints its family's pids, as stubborn does)
// under a reaper, prints "SERVER REAPER GRANDCHILD ESCAPED" on stdout once
// the server has said them, and blocks until it is killed.
func runFakeDaemon(mode string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := upstream.Config{
		Name:    "test",
		Command: exe,
		Env: map[string]string{modeEnv: mode, "GORACE": "atexit_sleep_ms=0",
			"GOCOVERDIR": os.Getenv("GOCOVERDIR")},
		Reaper: []string{exe, reaperArg},
	}
	p, err := upstream.Start(cfg, new(recorder))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		pids := map[string]int{}
		for _, line := range p.StderrTail() {
			if kind, n, ok := strings.Cut(line, " "); ok {
				pids[kind], _ = strconv.Atoi(n)
			}
		}
		if pids["grandchild"] > 0 && pids["escaped"] > 0 && pids["parent"] > 0 {
			fmt.Printf("%d %d %d %d\n", p.Pid(), pids["parent"], pids["grandchild"], pids["escaped"])
			sleepForever()
		}
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "the server did not print its pids")
	return 1
}

type envResult struct {
	Env []string `json:"env"`
	Dir string   `json:"dir"`
}

func ready() {
	os.Stdout.WriteString(`{"jsonrpc":"2.0","method":"test/ready"}` + "\n")
}

// sleepForever blocks a child that must outlive its input; the test ends it.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func answerEmpty(id json.RawMessage, _ string) string {
	return string(jsonrpc.Response(id, json.RawMessage(`{}`)))
}

// hugeAnswer is a result with an n-byte string in it and the id as the last
// member, so that the skipping scan must find it at the very end.
func hugeAnswer(id string, n int) string {
	return `{"jsonrpc":"2.0","result":{"data":"` + strings.Repeat("x", n) + `"},"id":` + id + `}`
}

// echo answers each request line until stdin ends.
func echo(answer func(id json.RawMessage, method string) string) int {
	br := bufio.NewReader(os.Stdin)
	for {
		line, err := br.ReadBytes('\n')
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method != "" {
			if _, err := os.Stdout.WriteString(answer(m.ID, m.Method) + "\n"); err != nil {
				return 1
			}
		}
		if err != nil {
			return 0
		}
	}
}

// ---- the parent side ----

// recorder is the fake Handler: it keeps what it is given.
type recorder struct {
	mu       sync.Mutex
	msgs     []*jsonrpc.Message
	tooLarge []tooLarge
	invalid  []string             // ids of invalid answers
	inFlight func(id string) bool // whether an invalid answer's id is taken; nil: every one
}

type tooLarge struct {
	ID   string
	Size int64
}

func (r *recorder) HandleMessage(m *jsonrpc.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

func (r *recorder) HandleTooLarge(id json.RawMessage, size int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tooLarge = append(r.tooLarge, tooLarge{string(id), size})
}

func (r *recorder) HandleInvalidAnswer(id json.RawMessage, _ error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight != nil && !r.inFlight(string(id)) {
		return false
	}
	r.invalid = append(r.invalid, string(id))
	return true
}

func (r *recorder) invalids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.invalid...)
}

// Flush implements upstream.Handler: the recorder holds nothing back.
func (r *recorder) Flush() {}

// methods lists the methods of the notifications and requests received.
func (r *recorder) methods() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		if m.Method != "" {
			out = append(out, m.Method)
		}
	}
	return out
}

// response returns the response with this id, if one came.
func (r *recorder) response(id string) *jsonrpc.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if m.Method == "" && string(m.ID) == id {
			return m
		}
	}
	return nil
}

func (r *recorder) tooLarges() []tooLarge {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tooLarge)
}

// waitReady waits for the child's test/ready notification.
func (r *recorder) waitReady(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return slices.Contains(r.methods(), "test/ready") },
		patience, 5*time.Millisecond, "no test/ready from the child")
}

// call sends a request and waits for its response.
func call(t *testing.T, p *upstream.Process, r *recorder, id int, method string) *jsonrpc.Message {
	t.Helper()
	require.NoError(t, p.Send(request(id, method)))
	var m *jsonrpc.Message
	require.Eventually(t, func() bool { m = r.response(strconv.Itoa(id)); return m != nil },
		patience, 5*time.Millisecond, "no response to %s id %d", method, id)
	return m
}

func request(id int, method string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%q}`, id, method)
}

// logRecord is one captured log record, attributes flattened to strings.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// testLog captures records; testHandler is its slog.Handler.
type testLog struct {
	mu   sync.Mutex
	recs []logRecord
}

type testHandler struct {
	log   *testLog
	attrs []slog.Attr
}

func (h testHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h testHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := make(map[string]string)
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	h.log.recs = append(h.log.recs, logRecord{r.Level, r.Message, attrs})
	return nil
}

func (h testHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return testHandler{h.log, append(slices.Clip(h.attrs), as...)}
}

func (h testHandler) WithGroup(string) slog.Handler { return h }

// records returns the records with this message.
func (l *testLog) records(msg string) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.recs {
		if r.Msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// atLeast returns the records at level or above.
func (l *testLog) atLeast(level slog.Level) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.recs {
		if r.Level >= level {
			out = append(out, r)
		}
	}
	return out
}

// fakeConfig runs this test binary in the given mode, with long graces that
// tests shorten where they matter.
func fakeConfig(t *testing.T, mode, arg string) upstream.Config {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	// GORACE: a race-enabled child otherwise sleeps a second before it
	// exits. GOCOVERDIR: a child built with -cover otherwise complains on
	// stderr that it has nowhere to write.
	return upstream.Config{
		Name:    "test",
		Command: exe,
		Env: map[string]string{modeEnv: mode, argEnv: arg,
			"GORACE": "atexit_sleep_ms=0", "GOCOVERDIR": t.TempDir()},
		StdinGrace: patience,
		TermGrace:  patience,
	}
}

// reaperArgv is what Config.Reaper is set to for this test binary.
func reaperArgv(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return []string{exe, reaperArg}
}

// eachMode runs f as two parallel subtests: "direct", the server spawned
// as the group's leader (reaper nil), and "reaper", the server run under
// a reaper (this test binary in its reaper mode).
func eachMode(t *testing.T, f func(t *testing.T, reaper []string)) {
	t.Helper()
	for _, m := range []struct {
		name   string
		reaper []string
	}{{"direct", nil}, {"reaper", reaperArgv(t)}} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			f(t, m.reaper)
		})
	}
}

// stderrPids reads the "KIND N" lines a mode prints on stderr, once each
// of kinds has come.
func stderrPids(t *testing.T, p *upstream.Process, kinds ...string) map[string]int {
	t.Helper()
	pids := map[string]int{}
	require.Eventually(t, func() bool {
		for _, line := range p.StderrTail() {
			if kind, n, ok := strings.Cut(line, " "); ok {
				pids[kind], _ = strconv.Atoi(n)
			}
		}
		for _, k := range kinds {
			if pids[k] <= 0 {
				return false
			}
		}
		return true
	}, patience, 5*time.Millisecond, "no %v pids on stderr", kinds)
	return pids
}

// start starts a server; the test's cleanup kills it and waits for Done.
func start(t *testing.T, cfg upstream.Config) (*upstream.Process, *recorder, *testLog) {
	t.Helper()
	logs := new(testLog)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(testHandler{log: logs})
	}
	rec := new(recorder)
	p, err := upstream.Start(cfg, rec)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill("test over")
		<-p.Done()
	})
	return p, rec, logs
}

// waitDone waits for Done, failing the test if it does not come.
func waitDone(t *testing.T, p *upstream.Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(patience):
		require.FailNow(t, "Done not closed", "pid %d", p.Pid())
	}
}

// gone reports whether pid no longer runs: no such process, or a zombie
// that nobody has reaped yet (an orphan waits for the init process, which
// in some containers never reaps).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// grandchildPid reads the pid a grandchild mode prints on stderr.
func grandchildPid(t *testing.T, p *upstream.Process) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		for _, line := range p.StderrTail() {
			if s, ok := strings.CutPrefix(line, "grandchild "); ok {
				pid, _ = strconv.Atoi(s)
				return pid > 0
			}
		}
		return false
	}, patience, 5*time.Millisecond, "no grandchild pid on stderr")
	return pid
}
