package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/integration/benchkit"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

// bins holds the paths of the binaries TestMain builds; they are read-only
// once the tests run.
var bins struct {
	mcpmux     string // the daemon and its CLI, with -race when this binary has it
	demoserver string // the scripted MCP server
	fakedocker string // the stand-in docker CLI, named docker in a folder of its own
	goTool     string // the go command that built them
}

// prebuiltEnv names a variable that may hold the path of an mcpmux binary
// to test instead of building one from this tree (a release build, say).
const prebuiltEnv = "MCPMUX_TEST_BINARY"

// hangAfter is how long the whole run may take before the watchdog dumps
// every stack it can reach and ends the run. It fires well before go test's
// own -timeout, so that the daemons' stacks are printed too.
const hangAfter = 10 * time.Minute

// TestMain builds the binaries once for all tests. The tests that only check
// behaviour call t.Parallel; those that measure a delay or a throughput do
// not, so go test runs them first, one at a time, on a quiet machine.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run is TestMain with deferred cleanup that os.Exit would skip.
func run(m *testing.M) int {
	if addr := os.Getenv(trickleEnv); addr != "" {
		return trickle(addr) // this binary, run as another user by TestWebListenerUnlockedByTricklers
	}
	if path := os.Getenv(foreignTapEnv); path != "" {
		return foreignTap(path) // this binary, run as another user by TestTapRefusesAnotherUser
	}
	// scripts/test names a folder of its run's own (MCPMUX_TEST_TMP): a
	// process left behind then names it in its command line.
	dir, err := os.MkdirTemp(os.Getenv("MCPMUX_TEST_TMP"), "mxbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The daemons keep what they learn of servers in the state folder: one
	// of this run's own, not the user's.
	if err := os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state")); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}

	stop := testutil.Watchdog(hangAfter+stressTime(), "integration: watchdog", dumpDaemons)
	defer stop()
	// Every daemon, connect and client the tests started must be gone.
	return testutil.Run(m)
}

// buildBinaries builds mcpmux, the demo server and the stand-in docker into dir. The daemon gets
// -race when this test binary has it, so that a data race in the daemon
// fails the test that provoked it (the daemon then exits 66 at shutdown).
// The demo server is built without it: it is not under test, and the
// throughput tests would pay for its instrumentation.
func buildBinaries(dir string) error {
	// go test puts its own Go's bin folder first on PATH, so this finds
	// the go command that runs the tests.
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is not on PATH: %w", err)
	}
	bins.goTool = goTool
	// mcpmux is built in its own module's folder, with that go.mod: the
	// binary under test has the dependencies a user's build gets, not the
	// ones this module's test peers pull in.
	root, err := benchkit.RepoRoot(context.Background())
	if err != nil {
		return err
	}
	build := func(dir, out, pkg string, race bool) error {
		args := []string{"build", "-o", out}
		if race {
			args = append(args, "-race")
		}
		cmd := exec.Command(goTool, append(args, pkg)...)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %v: %w\n%s", cmd.Args[1:], err, b)
		}
		return nil
	}
	bins.mcpmux = filepath.Join(dir, "mcpmux")
	bins.demoserver = filepath.Join(dir, "demoserver")
	var wg sync.WaitGroup
	bins.fakedocker = filepath.Join(dir, "fakebin", "docker")
	errs := make([]error, 3)
	if prebuilt := os.Getenv(prebuiltEnv); prebuilt != "" {
		bins.mcpmux = prebuilt
	} else {
		wg.Go(func() { errs[0] = build(root, bins.mcpmux, "./cmd/mcpmux", raceEnabled) })
	}
	wg.Go(func() { errs[1] = build("", bins.demoserver, "github.com/mcpmux/mcpmux/integration/demoserver", false) })
	wg.Go(func() { errs[2] = build("", bins.fakedocker, "github.com/mcpmux/mcpmux/integration/fakedocker", false) })
	wg.Wait()
	return errors.Join(errs...)
}

// live is the set of daemons running right now, for the watchdog.
var live struct {
	sync.Mutex
	daemons map[*daemon]bool
}

func trackDaemon(d *daemon, running bool) {
	live.Lock()
	defer live.Unlock()
	if live.daemons == nil {
		live.daemons = make(map[*daemon]bool)
	}
	if running {
		live.daemons[d] = true
	} else {
		delete(live.daemons, d)
	}
}

// dumpDaemons is the rest of the watchdog's dump, after this process's
// goroutines: it asks every live daemon for its own (SIGQUIT makes a Go
// program print them to stderr and exit) and prints what each wrote.
func dumpDaemons() {
	live.Lock()
	daemons := make([]*daemon, 0, len(live.daemons))
	for d := range live.daemons {
		daemons = append(daemons, d)
	}
	live.Unlock()
	for _, d := range daemons {
		d.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-d.exited:
		case <-time.After(5 * time.Second):
		}
		fmt.Fprintf(os.Stderr, "integration: watchdog: stderr of the daemon for %s:\n%s\n", d.path, d.stderr.String())
	}
}
