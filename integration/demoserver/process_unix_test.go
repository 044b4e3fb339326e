//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// process is the demo server running as a real child process: this test
// binary, re-executed with runMainEnv set.
type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string   // stdout lines; closed at EOF
	errs   chan string   // stderr lines; closed at EOF
	exited chan struct{} // closed once Wait has returned
	err    error         // Wait's result
}

// startProcess starts the server with args and extra environment. Cleanup
// kills it if it is still running and waits for its pipes to drain.
func startProcess(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	if _, ok := os.LookupEnv("GORACE"); !ok {
		// Under -race a clean exit otherwise lingers a second in the
		// race runtime's exit hook.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Our own pipes, so that Wait never closes a read end under a reader,
	// and a grandchild holding stderr cannot make Wait hang.
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()

	p := &process{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1024), errs: make(chan string, 1024), exited: make(chan struct{})}
	readers := make(chan struct{}, 2)
	for _, pipe := range []struct {
		r  *os.File
		ch chan string
	}{{outR, p.lines}, {errR, p.errs}} {
		go func() {
			defer func() { readers <- struct{}{} }()
			defer close(pipe.ch)
			br := bufio.NewReader(pipe.r)
			for {
				line, err := br.ReadString('\n')
				if line != "" {
					pipe.ch <- strings.TrimSuffix(line, "\n")
				}
				if err != nil {
					return
				}
			}
		}()
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		outR.Close() // unblocks a reader whose write end a grandchild still holds
		errR.Close()
		for range 2 {
			<-readers
		}
	})
	return p
}

// send writes one line to the process's stdin.
func (p *process) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write stdin: %v", err)
	}
}

// next returns the next stdout line.
func (p *process) next() string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatal("stdout closed")
		}
		return line
	case <-time.After(waitTimeout):
		p.t.Fatal("no line on stdout")
	}
	return ""
}

// expect reads the next stdout line and checks it is exactly want.
func (p *process) expect(want string) {
	p.t.Helper()
	if got := p.next(); got != want {
		p.t.Fatalf("stdout line:\n got %s\nwant %s", got, want)
	}
}

// stderrLine reads stderr until a line starting with prefix and returns it.
func (p *process) stderrLine(prefix string) string {
	p.t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case line, ok := <-p.errs:
			if !ok {
				p.t.Fatalf("stderr closed before a line starting %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			p.t.Fatalf("no stderr line starting %q", prefix)
		}
	}
}

// ping sends a ping and checks its answer.
func (p *process) ping(id int) {
	p.t.Helper()
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
	p.expect(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id))
}

// wait waits for the process to exit and returns Wait's error: nil for exit
// code 0, else usually an *exec.ExitError.
func (p *process) wait() error {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(waitTimeout):
		p.t.Fatal("process did not exit")
	}
	return nil
}

// exitCode is the exit code of a process that exited normally, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

func TestProcessExitsZeroOnEOF(t *testing.T) {
	p := startProcess(t, nil)
	p.ping(1)
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Errorf("exit: %v, want code 0", err)
	}
}

func TestProcessCrashExitCode(t *testing.T) {
	p := startProcess(t, nil)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{"code":5}}}`)
	p.stderrLine("mcpmux-demo: crash tool: exiting with code 5")
	if code := exitCode(p.wait()); code != 5 {
		t.Errorf("exit code %d, want 5", code)
	}
	for line := range p.lines {
		t.Errorf("stdout after crash: %s", line)
	}
}

func TestProcessCrashAfter(t *testing.T) {
	p := startProcess(t, []string{modeEnv + "=crash-after=1"})
	p.ping(1)
	if code := exitCode(p.wait()); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
}

func TestProcessSigterm(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		p := startProcess(t, nil)
		p.ping(1)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var ee *exec.ExitError
		if err := p.wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("exit: %v, want killed by SIGTERM", err)
		}
	})
	t.Run("ignored", func(t *testing.T) {
		p := startProcess(t, nil, "--ignore-sigterm")
		p.ping(1) // SIGTERM is ignored before stdin is read
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		p.ping(2)
		p.stdin.Close()
		if err := p.wait(); err != nil {
			t.Errorf("exit: %v, want code 0", err)
		}
	})
}

func TestProcessGrandchild(t *testing.T) {
	p := startProcess(t, nil, "--grandchild")
	var pid int
	line := p.stderrLine("grandchild pid ")
	if _, err := fmt.Sscanf(line, "grandchild pid %d", &pid); err != nil || pid <= 0 {
		t.Fatalf("bad grandchild line %q", line)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// The grandchild writes to the same stderr once it ignores SIGTERM.
	p.stderrLine(fmt.Sprintf("mcpmux-demo: grandchild %d ignoring SIGTERM", pid))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("signal grandchild: %v", err)
	}

	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stats"}}`)
	if want := fmt.Sprintf(`"grandchild":%d,`, pid); !strings.Contains(p.next(), want) {
		t.Errorf("stats lack %s", want)
	}
	// Best effort: a grandchild that SIGTERM had killed would most likely
	// have been reaped by now.
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("grandchild gone after SIGTERM: %v", err)
	}

	// Kill the grandchild while its parent lives to reap it, then check it
	// is gone.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill grandchild: %v", err)
	}
	testutil.Until(t, waitTimeout, "the grandchild to be reaped", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Errorf("exit: %v, want code 0", err)
	}
}

// stayUpWindow is how long TestProcessStaysUp watches a server that should
// not exit. It is not synchronisation: the test asserts that nothing happens.
const stayUpWindow = 100 * time.Millisecond

// TestProcessStaysUp checks the modes in which the server has nothing left to
// do but must not exit. Each logs a line just before it starts idling. A
// server that the Go runtime aborted as deadlocked ("all goroutines are
// asleep") would exit with code 2 within microseconds of that line; a healthy
// one is still there after stayUpWindow and dies from our SIGKILL. (Race
// builds never report such deadlocks, so only plain runs can catch one.)
func TestProcessStaysUp(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		closeIn bool   // close stdin first
		logLine string // logged once the mode is idling
	}{
		{"no-read", []string{"--no-read"}, false, "mcpmux-demo: --no-read: not reading stdin"},
		{"ignore-eof", []string{"--ignore-eof"}, true, "mcpmux-demo: --ignore-eof: staying up"},
		{"grandchild-only", []string{"--grandchild-only"}, true, "mcpmux-demo: grandchild "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProcess(t, nil, tt.args...)
			if tt.closeIn {
				p.stdin.Close()
			}
			p.stderrLine(tt.logLine)
			select {
			case <-p.exited:
				t.Fatalf("exited on its own: %v; stderr left: %q", p.err, drain(p.errs))
			case <-time.After(stayUpWindow):
			}
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			var ee *exec.ExitError
			if err := p.wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("exit: %v, want killed by SIGKILL; stderr left: %q", err, drain(p.errs))
			}
		})
	}
}

// drain returns what is left in a line channel, once its writer is done.
func drain(ch <-chan string) []string {
	var out []string
	for line := range ch {
		out = append(out, line)
	}
	return out
}
