//go:build unix

package socket_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// squatEnv, set to "MODE PATH", turns the test binary into the squatter:
// another local user's process that takes PATH before mcpmux does. It
// prepares PATH as MODE says, prints "ready", waits for stdin to close, then
// prints what reached its socket (see backlog) and exits. Modes:
//
//	dirNNN   a folder with octal mode NNN, listening on PATH/s.sock
//	symlink  a symlink to its own 0700 folder PATH.real, listening on PATH.real/s.sock
//	file     a plain file, no socket
//	drop     binds a socket at PATH, then becomes uid nobody, then listens
//
// The first three run as nobody from the start; drop starts as the test's
// user, so that the socket file is that user's while the kernel records
// nobody as the listener.
const squatEnv = "MCPMUX_SOCKET_TEST_SQUAT"

// squatSock is the socket a squatter listens on inside its folder.
const squatSock = "s.sock"

func runSquatter(spec string) int {
	mode, path, _ := strings.Cut(spec, " ")
	fd, err := squat(mode, path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "squat %s %s: %v\n", mode, path, err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	fmt.Println(backlog(fd))
	return 0
}

// squat prepares path as mode says and returns the listening socket, or -1.
func squat(mode, path string) (int, error) {
	switch {
	case mode == "file":
		return -1, os.WriteFile(path, []byte("not a folder\n"), 0o644)
	case mode == "symlink":
		real := path + ".real"
		if err := os.Mkdir(real, 0o700); err != nil {
			return -1, err
		}
		if err := os.Symlink(real, path); err != nil {
			return -1, err
		}
		return listenAs(filepath.Join(real, squatSock), false)
	case mode == "drop":
		return listenAs(path, true)
	case strings.HasPrefix(mode, "dir"):
		perm, err := strconv.ParseUint(strings.TrimPrefix(mode, "dir"), 8, 32)
		if err != nil {
			return -1, err
		}
		if err := os.Mkdir(path, 0o700); err != nil {
			return -1, err
		}
		if err := os.Chmod(path, fs.FileMode(perm)); err != nil {
			return -1, err
		}
		return listenAs(filepath.Join(path, squatSock), false)
	}
	return -1, fmt.Errorf("unknown mode %q", mode)
}

// listenAs binds a Unix socket at path and listens on it. With drop it
// becomes uid and gid nobody between bind and listen: the kernel records the
// listener's credentials at listen, so clients see nobody as their peer.
func listenAs(path string, drop bool) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return -1, fmt.Errorf("bind: %w", err)
	}
	if drop {
		// syscall's Set* change every thread of the process, not just this one.
		err := errors.Join(syscall.Setgroups(nil), syscall.Setgid(nobody), syscall.Setuid(nobody))
		if err != nil {
			return -1, fmt.Errorf("drop to uid %d: %w", nobody, err)
		}
	}
	if err := unix.Listen(fd, 8); err != nil {
		return -1, fmt.Errorf("listen: %w", err)
	}
	return fd, nil
}

// backlog accepts, without waiting, every connection queued on fd and
// reports how many there were, how many bytes their clients had sent, and
// how many clients still held theirs open.
func backlog(fd int) string {
	var conns, sent, open int
	if fd >= 0 && unix.SetNonblock(fd, true) == nil {
		for {
			c, _, err := unix.Accept(fd)
			if err != nil {
				break // EAGAIN: the queue is empty
			}
			conns++
			n, stillOpen := drain(c)
			sent += n
			if stillOpen {
				open++
			}
			unix.Close(c)
		}
	}
	return fmt.Sprintf("conns=%d bytes=%d open=%d", conns, sent, open)
}

// drain reads c without waiting until its client's end of stream.
func drain(c int) (n int, open bool) {
	if unix.SetNonblock(c, true) != nil {
		return 0, true
	}
	buf := make([]byte, 4096)
	for {
		m, err := unix.Read(c, buf)
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return n, true // EAGAIN: nothing more yet, and no end of stream
		case m == 0:
			return n, false
		default:
			n += m
		}
	}
}

// squatter is a running squatter process, owned by the test that started it.
type squatter struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr testutil.Buffer
	done   bool
}

// squatterExe returns a copy of the test binary that nobody can run, in a
// folder of its own.
func squatterExe(t *testing.T) string {
	t.Helper()
	skipUnlessRoot(t)
	dir := testutil.ShortDir(t)
	require.NoError(t, os.Chmod(dir, 0o711))
	return copyTestBinary(t, filepath.Join(dir, "squat"))
}

// startSquatter runs exe as a squatter in mode on path, as nobody unless the
// mode is drop, and returns once it is ready. The test's cleanup reaps it.
func startSquatter(t *testing.T, exe, mode, path string) *squatter {
	t.Helper()
	skipUnlessRoot(t)
	s := &squatter{cmd: exec.Command(exe)}
	// No exit pause under -race: the report is read before the exit.
	s.cmd.Env = []string{squatEnv + "=" + mode + " " + path, "GORACE=atexit_sleep_ms=0"}
	if mode != "drop" {
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	s.cmd.Stderr = &s.stderr
	var err error
	s.stdin, err = s.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	s.out = bufio.NewReader(stdout)
	err = s.cmd.Start()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
		t.Skipf("cannot start a process as uid %d here: %v", nobody, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { s.stop() })

	line, err := s.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		s.stop()
		t.Fatalf("squatter %s %s: got %q, %v; stderr: %s", mode, path, line, err, s.stderr.String())
	}
	return s
}

// finish tells the squatter to stop and returns its report on what reached
// its socket, in backlog's format.
func (s *squatter) finish(t *testing.T) string {
	t.Helper()
	s.stdin.Close()
	line, err := s.out.ReadString('\n')
	waitErr := s.stop()
	require.NoError(t, err, "squatter's report; stderr: %s", s.stderr.String())
	require.NoError(t, waitErr, "squatter's exit; stderr: %s", s.stderr.String())
	return strings.TrimSuffix(line, "\n")
}

// stop closes the squatter's stdin, reads what is left of its stdout and
// reaps it. It is idempotent.
func (s *squatter) stop() error {
	if s.done {
		return nil
	}
	s.done = true
	s.stdin.Close()
	io.Copy(io.Discard, s.out)
	return s.cmd.Wait()
}

func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another uid; run the tests as root to cover foreign folders and peers")
	}
}
