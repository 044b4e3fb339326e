package upstream

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// StderrMode says where a server's stderr goes. It is never merged into
// stdout, which carries protocol messages only.
type StderrMode int

const (
	// StderrLog logs each stderr line at Info, tagged with the server, and
	// keeps the last lines for StderrTail. The zero value.
	StderrLog StderrMode = iota
	// StderrInherit hands stderr to Config.StderrInherit (the daemon's own
	// stderr, as the caller gives it).
	StderrInherit
	// StderrDiscard sends stderr to the null device.
	StderrDiscard
	// StderrFile appends stderr to Config.StderrPath.
	StderrFile
)

func (m StderrMode) String() string {
	switch m {
	case StderrLog:
		return "log"
	case StderrInherit:
		return "inherit"
	case StderrDiscard:
		return "discard"
	case StderrFile:
		return "file"
	}
	return fmt.Sprintf("StderrMode(%d)", int(m))
}

// Defaults that a zero Config field stands for.
const (
	DefaultStdinGrace      = 2 * time.Second
	DefaultTermGrace       = 2 * time.Second
	DefaultMaxMessageBytes = 16 << 20
	DefaultMaxJunkLines    = 10
	DefaultBannerBytes     = 64 << 10
	DefaultStderrTailLines = 20

	DefaultWriteStallTimeout = time.Minute
)

// None, as Config.StdinGrace or Config.TermGrace, is no wait at all; as
// Config.MaxJunkLines or Config.BannerBytes, nothing tolerated; as
// Config.WriteStallTimeout, no check. (Their zero value is the default.)
const None = -1

// inheritedEnv are the variables every server gets from the daemon's
// environment, when set there.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

// Config describes one server and how to supervise it. Zero values stand for
// the defaults named on each field. Library code reads nothing from the
// daemon's own environment: Environ and StderrInherit are handed in.
type Config struct {
	// Name names the server in logs and errors.
	Name string
	// Command is the executable. One containing a '/' is used as it is (the
	// config layer has made it absolute); any other is looked up, at every
	// Start, in the PATH found in Environ. Only absolute PATH entries are
	// searched. No shell ever sees it.
	Command string
	// Args are passed to the executable unchanged, never split or expanded.
	Args []string
	// Environ is the daemon's environment ("K=V"), as given by the caller.
	// The server inherits only HOME LOGNAME PATH SHELL TERM USER and the
	// InheritEnv names from it, minus any value starting with "()" (an
	// exported shell function).
	Environ []string
	// InheritEnv adds names to the inherited allowlist.
	InheritEnv []string
	// Env is set last, over whatever was inherited.
	Env map[string]string
	// Dir is the working directory; "" keeps the daemon's.
	Dir string

	// Stderr routes the server's stderr; see StderrMode.
	Stderr StderrMode
	// StderrPath is the file for StderrFile, opened for appending and
	// created 0600 if missing.
	StderrPath string
	// StderrInherit is where StderrInherit sends stderr. An *os.File is
	// handed to the server as is; any other writer is fed by a goroutine
	// and must not block.
	StderrInherit io.Writer
	// StderrTailLines is how many stderr lines StderrTail keeps (StderrLog
	// only); 0 means DefaultStderrTailLines.
	StderrTailLines int

	// StdinGrace is how long the server gets to exit after its stdin is
	// closed, before SIGTERM; 0 means DefaultStdinGrace, None (or any
	// negative) no wait.
	StdinGrace time.Duration
	// TermGrace is how long the server gets after SIGTERM, before SIGKILL;
	// 0 means DefaultTermGrace, None (or any negative) no wait.
	TermGrace time.Duration

	// MaxMessageBytes bounds one stdout line; 0 means
	// DefaultMaxMessageBytes. A longer line is skipped and reported to
	// Handler.HandleTooLarge.
	MaxMessageBytes int
	// MaxJunkLines is how many stdout lines in a row that are not JSON-RPC
	// messages are tolerated; one more kills the server (ReasonJunkOutput).
	// 0 means DefaultMaxJunkLines; None (or any negative) tolerates none.
	MaxJunkLines int
	// BannerBytes is how many bytes of such lines are tolerated before the
	// server's first message (a startup banner) without counting as junk;
	// 0 means DefaultBannerBytes, None (or any negative) none.
	BannerBytes int
	// WriteQueueBytes is the soft bound on bytes queued for stdin: above it
	// WaitWritable blocks, and Send refuses (SendLaterWait waits for) what
	// would take the queue past twice this. 0 means twice MaxMessageBytes; it should be at least that,
	// or a message of the largest allowed size can never be queued.
	WriteQueueBytes int
	// WriteStallTimeout: a server that has bytes waiting and accepts none
	// of them for this long is stalled and killed (ReasonStalled). 0 means
	// DefaultWriteStallTimeout; None (or any negative) turns the check off.
	WriteStallTimeout time.Duration

	// Reaper is the argv prefix that starts a reaper (RunReaper), such as
	// {"/usr/bin/mcpmux", "__reaper"}; its first element must be an absolute
	// path. With one, the reaper leads the process group and runs the
	// server in it, and the server and everything it started die with
	// mcpmux even when mcpmux is SIGKILLed. Empty: the server is spawned
	// directly and leads its group, and a SIGKILLed mcpmux leaves it behind
	// (on Linux a parent-death signal still takes the server itself down).
	Reaper []string

	// Logger receives lifecycle, peer-fault and stderr records, with the
	// keys server and pid; nil discards them.
	Logger *slog.Logger
}

// Validate reports the first field that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Command == "":
		return errors.New("command is empty")
	case strings.ContainsRune(c.Command, 0):
		return fmt.Errorf("command %q contains a NUL byte", c.Command)
	case c.Stderr < StderrLog || c.Stderr > StderrFile:
		return fmt.Errorf("unknown stderr mode %d", int(c.Stderr))
	case c.Stderr == StderrFile && c.StderrPath == "":
		return errors.New("stderr mode file needs a path")
	case c.Stderr == StderrInherit && c.StderrInherit == nil:
		return errors.New("stderr mode inherit needs a writer")
	case c.StderrTailLines < 0:
		return fmt.Errorf("stderr tail lines %d is negative", c.StderrTailLines)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("max message bytes %d is negative", c.MaxMessageBytes)
	case c.WriteQueueBytes < 0:
		return fmt.Errorf("write queue bytes %d is negative", c.WriteQueueBytes)
	case len(c.Reaper) > 0 && !filepath.IsAbs(c.Reaper[0]):
		return fmt.Errorf("reaper %q is not an absolute path", c.Reaper[0])
	}
	for _, a := range c.Reaper {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("reaper argument %q contains a NUL byte", a)
		}
	}
	for k := range c.Env {
		if !validEnvName(k) {
			return fmt.Errorf("env name %q is not valid", k)
		}
	}
	for _, k := range c.InheritEnv {
		if !validEnvName(k) {
			return fmt.Errorf("inherit_env name %q is not valid", k)
		}
	}
	return nil
}

func validEnvName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}

// withDefaults returns c with its zero fields filled in.
func (c Config) withDefaults() Config {
	if c.StdinGrace == 0 {
		c.StdinGrace = DefaultStdinGrace
	}
	if c.TermGrace == 0 {
		c.TermGrace = DefaultTermGrace
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxJunkLines == 0 {
		c.MaxJunkLines = DefaultMaxJunkLines
	} else if c.MaxJunkLines < 0 {
		c.MaxJunkLines = 0
	}
	if c.BannerBytes == 0 {
		c.BannerBytes = DefaultBannerBytes
	} else if c.BannerBytes < 0 {
		c.BannerBytes = 0
	}
	if c.WriteQueueBytes == 0 {
		c.WriteQueueBytes = 2 * c.MaxMessageBytes
	}
	if c.StderrTailLines == 0 {
		c.StderrTailLines = DefaultStderrTailLines
	}
	if c.WriteStallTimeout == 0 {
		c.WriteStallTimeout = DefaultWriteStallTimeout
	} else if c.WriteStallTimeout < 0 {
		c.WriteStallTimeout = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// childEnv builds the server's environment: the allowlisted names from
// Environ (the last occurrence of a name wins, as in a shell), minus
// exported shell functions, then Env on top. The result is sorted by name.
func childEnv(environ, inherit []string, env map[string]string) []string {
	allowed := make(map[string]bool, len(inheritedEnv)+len(inherit))
	for _, k := range inheritedEnv {
		allowed[k] = true
	}
	for _, k := range inherit {
		allowed[k] = true
	}
	vals := make(map[string]string, len(allowed)+len(env))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !allowed[k] {
			continue
		}
		if strings.HasPrefix(v, "()") {
			delete(vals, k) // a function can only shadow, never carry, a value
			continue
		}
		vals[k] = v
	}
	for k, v := range env {
		vals[k] = v
	}
	out := make([]string, 0, len(vals))
	for k, v := range vals {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// NotFoundError reports a command that no PATH entry holds. It matches
// exec.ErrNotFound with errors.Is.
type NotFoundError struct {
	Command string
	Path    string // the PATH that was searched
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("command %q not found in PATH (%s)", e.Command, e.Path)
}

// Unwrap lets errors.Is(err, exec.ErrNotFound) hold.
func (e *NotFoundError) Unwrap() error { return exec.ErrNotFound }

// resolveCommand finds the executable to run. A command with a slash is
// taken as it is; a bare name is searched in the PATH of environ, skipping
// empty and relative entries so that the daemon's working directory never
// decides what runs (the reason os/exec reports exec.ErrDot).
func resolveCommand(command string, environ []string) (string, error) {
	if strings.Contains(command, "/") {
		return command, nil
	}
	path := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v // the last one wins, as for any variable
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, command)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", &NotFoundError{Command: command, Path: path}
}
