package integration

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// fakeEngine is the stand-in docker's daemon: it starts each "container"
// as its own child, outside the process tree of whoever ran the CLI, the
// way dockerd does, and records what it was asked to do.
type fakeEngine struct {
	sock string
	ln   net.Listener
	done chan struct{} // closed when serve returns

	mu      sync.Mutex
	next    int
	running map[string]*exec.Cmd
	events  []string // "run ID", "kill ID", in order
}

// startFakeEngine listens and serves until the test ends; at cleanup it
// kills and reaps whatever container is still running.
func startFakeEngine(t *testing.T) *fakeEngine {
	t.Helper()
	e := &fakeEngine{sock: filepath.Join(testutil.ShortDir(t), "engine.sock"), done: make(chan struct{}), running: map[string]*exec.Cmd{}}
	ln, err := net.Listen("unix", e.sock)
	require.NoError(t, err)
	e.ln = ln
	go e.serve() // owned by the cleanup, which waits for done
	t.Cleanup(func() {
		e.ln.Close()
		<-e.done
		e.mu.Lock()
		defer e.mu.Unlock()
		for id, cmd := range e.running {
			cmd.Process.Kill()
			cmd.Wait()
			delete(e.running, id)
		}
	})
	return e
}

// serve answers one request per connection, in turn.
func (e *fakeEngine) serve() {
	defer close(e.done)
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		c.SetDeadline(time.Now().Add(ioTimeout))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil {
			fmt.Fprintln(c, e.handle(strings.TrimSpace(line)))
		}
		c.Close()
	}
}

func (e *fakeEngine) handle(req string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch verb, arg, _ := strings.Cut(req, " "); verb {
	case "run":
		e.next++
		id := fmt.Sprintf("c%d", e.next)
		cmd := exec.Command(bins.fakedocker, "__container")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return "error " + err.Error()
		}
		e.running[id] = cmd
		e.events = append(e.events, "run "+id)
		return id
	case "kill":
		cmd, ok := e.running[arg]
		if !ok {
			return "No such container: " + arg
		}
		cmd.Process.Kill()
		cmd.Wait()
		delete(e.running, arg)
		e.events = append(e.events, "kill "+arg)
		return "ok"
	default:
		return "error unknown request " + req
	}
}

func (e *fakeEngine) log() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

// waitLog waits until the engine's log is want.
func (e *fakeEngine) waitLog(t *testing.T, want ...string) {
	t.Helper()
	testutil.Eventually(t, readyTimeout, "the engine's log", func() (bool, error) {
		got := e.log()
		return slices.Equal(got, want), fmt.Errorf("got %q, want %q", got, want)
	})
}

// containerDaemon serves a config whose server runs as
// "docker run -i --rm IMAGE", docker being the stand-in on the daemon's PATH.
func containerDaemon(t *testing.T, e *fakeEngine) *daemon {
	t.Helper()
	cfg := writeConfig(t, fmt.Sprintf(`[servers.box]
command = "docker"
args = ["run", "-i", "--rm", "example/box"]
env = { FAKEDOCKER_DAEMON = %q, FAKEDOCKER_SERVER = %q }
inherit_env = ["GORACE"]
`, e.sock, bins.demoserver), "")
	cfg.env = []string{"PATH=" + filepath.Dir(bins.fakedocker) + string(os.PathListSeparator) + os.Getenv("PATH")}
	return serveConfig(t, cfg)
}

// TestContainerStopsWithItsServer: a server started as "docker run" runs
// in a container that the engine's daemon owns; mcpmux kills it when the
// server stops, when it crashes (before the restart starts another), and,
// through the reaper, when mcpmux itself is SIGKILLed.
func TestContainerStopsWithItsServer(t *testing.T) {
	t.Parallel()
	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		e := startFakeEngine(t)
		d := containerDaemon(t, e)
		c := open(t, d.socket("box"))
		c.mustStats(t)
		e.waitLog(t, "run c1")
		c.close()
		d.stop()
		// Not waited for: the daemon has exited, so it said it was done.
		assert.Equal(t, []string{"run c1", "kill c1"}, e.log(), "the container is killed before mcpmux serve exits")
	})
	t.Run("crash", func(t *testing.T) {
		t.Parallel()
		e := startFakeEngine(t)
		d := containerDaemon(t, e)
		c := open(t, d.socket("box"))
		pid := c.mustStats(t).PID
		c.close()
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL), "the server (the docker CLI's pid)")
		e.waitLog(t, "run c1", "kill c1")
		testutil.Until(t, readyTimeout, "mcpmux has seen the crash", func() bool {
			state, now := status(t, d.path).server("box")
			return now != pid || state != "ready"
		})
		c = open(t, d.socket("box"))
		assert.NotEqual(t, pid, c.mustStats(t).PID, "a new server answers")
		c.close()
		assert.Equal(t, []string{"run c1", "kill c1", "run c2"}, e.log(), "the old container is killed before the new one starts")
	})
	t.Run("mcpmux SIGKILLed", func(t *testing.T) {
		t.Parallel()
		e := startFakeEngine(t)
		d := containerDaemon(t, e)
		c := open(t, d.socket("box"))
		pid := c.mustStats(t).PID
		c.close()
		d.kill()
		e.waitLog(t, "run c1", "kill c1")
		testutil.Until(t, readyTimeout, "the docker CLI is gone too", func() bool { return gone(pid) })
	})
}
