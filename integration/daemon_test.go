package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	muxdaemon "github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// Time limits of the harness. They are generous because the daemon runs
// with the race detector on a small CI machine; the tests that measure
// something state their own, tighter limits.
const (
	readyTimeout = 20 * time.Second // from `serve` to every socket accepting
	stopTimeout  = 10 * time.Second // from SIGTERM to exit, before SIGKILL
	ioTimeout    = 15 * time.Second // one read or write on a client socket
	runTimeout   = 30 * time.Second // one `mcpmux connect` run
)

// daemonConfig is a config file in its own short temporary folder, which
// also holds socket_dir: sun_path allows about 104 bytes, so the folder comes
// is testutil.ShortDir rather than t.TempDir().
type daemonConfig struct {
	dir     string   // the temporary folder
	path    string   // the config file
	sockets string   // socket_dir
	servers []string // the [servers.NAME] names, in file order
	env     []string // added to the daemon's environment
}

var serverTable = regexp.MustCompile(`(?m)^\[servers\.([A-Za-z0-9][A-Za-z0-9._-]*)\]`)

// writeConfig writes a config with the given [servers.*] tables and extra
// lines for [listen]. The daemon logs at debug level, so that its log is
// busy (nothing of it may reach a client) and useful when a test fails.
func writeConfig(tb testing.TB, servers, listen string) *daemonConfig {
	tb.Helper()
	dir := testutil.ShortDir(tb)
	c := &daemonConfig{dir: dir, path: filepath.Join(dir, "mux.toml"), sockets: filepath.Join(dir, "s")}
	for _, m := range serverTable.FindAllStringSubmatch(servers, -1) {
		c.servers = append(c.servers, m[1])
	}
	require.NotEmpty(tb, c.servers, "the config needs at least one [servers.NAME] table")
	text := fmt.Sprintf("[daemon]\nlog_level = \"debug\"\n\n[listen]\nsocket_dir = %q\n%s\n\n%s\n", c.sockets, listen, servers)
	require.NoError(tb, os.WriteFile(c.path, []byte(text), 0o600))
	return c
}

// socket is the path where server name is served.
func (c *daemonConfig) socket(name string) string {
	return filepath.Join(c.sockets, name+".sock")
}

// demo is a [servers.NAME] table running the demo server with args, plus
// any extra keys (one per line). GORACE is passed through to the server's
// side (mcpmux's reaper is the same race-built binary): see mcpmux.
func demo(name string, args []string, extra ...string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf("[servers.%s]\ncommand = %q\nargs = [%s]\ninherit_env = [\"GORACE\"]\n%s\n",
		name, bins.demoserver, strings.Join(quoted, ", "), strings.Join(extra, "\n"))
}

// mcpmux is a command running the mcpmux under test. A program built with
// -race sleeps for GORACE's atexit_sleep_ms (1 s by default) before it
// exits, so that reports from goroutines still running get out; every
// daemon, bridge and reaper of these tests exits, so unless GORACE is set
// already the pause is cut to 50 ms.
func mcpmux(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bins.mcpmux, args...)
	if os.Getenv("GORACE") == "" {
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=50")
	}
	return cmd
}

// daemon is one running `mcpmux serve`.
type daemon struct {
	*daemonConfig
	tb     testing.TB
	cmd    *exec.Cmd
	stdout testutil.Buffer // must stay empty: the daemon's stdout is unused
	stderr testutil.Buffer // its log

	exited  chan struct{} // closed once Wait has returned
	waitErr error         // Wait's result, set before exited is closed
	killed  bool          // the test SIGKILLed it on purpose
}

// startDaemon writes a config (see writeConfig) and serves it.
func startDaemon(tb testing.TB, servers, listen string) *daemon {
	tb.Helper()
	return serveConfig(tb, writeConfig(tb, servers, listen))
}

// serveConfig starts `mcpmux serve --config` and returns once every
// configured socket accepts connections. At cleanup the daemon gets SIGTERM
// and must exit 0 with nothing on stdout; a daemon built with -race exits 66
// instead when it saw a data race, so this is also where races surface. Its
// log is printed when the test failed.
func serveConfig(tb testing.TB, cfg *daemonConfig) *daemon {
	tb.Helper()
	d := &daemon{daemonConfig: cfg, tb: tb, exited: make(chan struct{})}
	d.cmd = mcpmux(context.Background(), "serve", "--config", cfg.path)
	if len(cfg.env) > 0 {
		d.cmd.Env = append(d.cmd.Environ(), cfg.env...)
	}
	d.cmd.Stdout = &d.stdout
	d.cmd.Stderr = &d.stderr
	d.cmd.WaitDelay = 5 * time.Second // do not hang on a pipe some stray child still holds
	require.NoError(tb, d.cmd.Start())
	trackDaemon(d, true)
	go func() { // owned by stop, which waits for exited
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	tb.Cleanup(d.stop)
	d.waitReady()
	return d
}

// waitReady polls every socket, the servers' and the endpoint all's, until
// it accepts a connection. The daemon sees each probe as a client that
// leaves at once.
func (d *daemon) waitReady() {
	d.tb.Helper()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	names := d.servers
	if len(names) > 0 {
		names = append(slices.Clip(names), "all")
	}
	for _, name := range names {
		for {
			c, err := net.DialTimeout("unix", d.socket(name), time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				d.tb.Fatalf("%s did not accept within %v: %v", d.socket(name), readyTimeout, err)
			}
			select {
			case <-d.exited:
				d.tb.Fatalf("mcpmux serve exited before %s accepted: %v", d.socket(name), d.waitErr)
			case <-tick.C:
			}
		}
	}
}

// kill SIGKILLs the daemon and waits for it, as a crash would end it.
func (d *daemon) kill() {
	d.tb.Helper()
	d.killed = true
	require.NoError(d.tb, d.cmd.Process.Kill())
	<-d.exited
	trackDaemon(d, false)
}

// stop is the cleanup: SIGTERM, wait, SIGKILL after stopTimeout.
func (d *daemon) stop() {
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(stopTimeout)
		select {
		case <-d.exited:
		case <-t.C:
			d.tb.Errorf("mcpmux serve did not exit within %v of SIGTERM; killing it", stopTimeout)
			d.cmd.Process.Kill()
			<-d.exited
		}
		t.Stop()
	}
	trackDaemon(d, false)
	if !d.killed {
		assert.NoError(d.tb, d.waitErr, "mcpmux serve must exit 0 after SIGTERM (66 means the race detector fired)")
	}
	assert.Empty(d.tb, d.stdout.String(), "mcpmux serve wrote to its stdout")
	if d.tb.Failed() {
		d.tb.Logf("log of mcpmux serve --config %s:\n%s", d.path, d.stderr.String())
	}
}

// log is what the daemon has logged so far.
func (d *daemon) log() string { return d.stderr.String() }

// connectRun is the outcome of one `mcpmux connect`.
type connectRun struct {
	stdout, stderr string
	code           int // exit code
	elapsed        time.Duration
}

// runConnect runs `mcpmux connect --config cfg args...` with stdin and
// waits for it to exit.
func runConnect(tb testing.TB, cfg string, stdin string, args ...string) connectRun {
	tb.Helper()
	return runMcpmux(tb, nil, stdin, append([]string{"connect", "--config", cfg}, args...)...)
}

// runMcpmux runs mcpmux with args, env added to its environment, and
// stdin, and waits for it to exit.
func runMcpmux(tb testing.TB, env []string, stdin string, args ...string) connectRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := mcpmux(ctx, args...)
	cmd.Env = append(cmd.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := connectRun{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		tb.Fatalf("run mcpmux %s: %v", args[0], err)
	}
	require.NoError(tb, ctx.Err(), "mcpmux %s did not exit within %v; stderr: %s", args[0], runTimeout, r.stderr)
	return r
}

// status is what `mcpmux status --json` says of the daemon.
func (d *daemon) status(t *testing.T) muxdaemon.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
	require.NoError(t, err)
	var st muxdaemon.Status
	require.NoError(t, json.Unmarshal(out, &st), "%s", out)
	return st
}
