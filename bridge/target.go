package bridge

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Target is the daemon of a config file, as Config.Find sees it now: where
// it serves, and what the file says when it loads.
type Target struct {
	Path string // the config file, as named (for messages)
	Dir  string // the socket folder the daemon serves in, or would
	// Loaded: the file loads now, and Servers and Autostart are what it
	// says. A file that does not load leaves the daemon the say.
	Loaded    bool
	Servers   []string // the servers the file configures
	Endpoints []string // its endpoints, reached as servers are (the implicit all too)
	Autostart bool     // autostart in [daemon]
	// Serve is the command that starts a daemon for the file, logging to
	// log (auto-start); nil when there is no file that loads.
	Serve func(log string) (*exec.Cmd, error)
}

// autostart reports whether connect may start a daemon for this target:
// the file must load (a daemon would refuse it otherwise) and allow it.
func (t *Target) autostart() bool {
	return t.Loaded && t.Autostart
}

// socket is the path of server name's socket.
func (t *Target) socket(name string) string {
	return filepath.Join(t.Dir, name+".sock")
}

// checkServer refuses a server the config file does not have, naming the
// ones it has. With a file that does not load, the daemon says (reach).
func (t *Target) checkServer(name string) error {
	if !t.Loaded || slices.Contains(t.Servers, name) || slices.Contains(t.Endpoints, name) {
		return nil
	}
	if len(t.Servers) == 0 {
		return &unknownServerError{fmt.Sprintf("no server named %q: %s configures no server", name, t.Path)}
	}
	msg := fmt.Sprintf("no server named %q in %s; it configures: %s", name, t.Path, strings.Join(t.Servers, ", "))
	if written := slices.DeleteFunc(slices.Clone(t.Endpoints), func(e string) bool { return e == "all" }); len(written) > 0 {
		msg += "; endpoints: " + strings.Join(written, ", ")
	}
	return &unknownServerError{msg}
}

// unknownServerError: the config file has no server of that name.
type unknownServerError struct{ msg string }

func (e *unknownServerError) Error() string { return e.msg }

// autostartOff is why connect cannot go on when no daemon serves sock and
// it may not start one: off says who turned auto-start off.
func autostartOff(t *Target, sock, off string) error {
	serve := "mcpmux serve"
	if t.Path != "" {
		serve += " --config " + t.Path
	}
	return fmt.Errorf("no mcpmux daemon is serving %s, and auto-start is off (%s): start one with `%s`, or as a service (`mcpmux service install`)", sock, off, serve)
}
