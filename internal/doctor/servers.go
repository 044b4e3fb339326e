package doctor

import (
	"fmt"
	"strings"

	"github.com/mcpmux/mcpmux/mux"
)

// checkServers reports each server the daemon runs: its state, and for one
// that is not well its last exit, its last stderr line and what to try.
func (d *checkup) checkServers() {
	if d.st == nil {
		return
	}
	for _, s := range d.st.Servers {
		d.checkServer(s)
	}
}

func (d *checkup) checkServer(s mux.Status) {
	name := s.Name
	switch s.State {
	case mux.StateReady:
		line := fmt.Sprintf("server %s: ready, pid %d, up %s, %d %s", name, s.Pid, s.Uptime, s.Sessions, plural(s.Sessions, "session", "sessions"))
		if s.Restarts > 0 {
			line += fmt.Sprintf(", restarted %d %s (last exit: %s)", s.Restarts, plural(s.Restarts, "time", "times"), s.LastExit)
		}
		d.add(OK, "%s", line)
		if s.Serialized {
			d.add(Note, "server %s: serialized as a whole: its sessions' interactive requests (tools/call, prompts/get, resources/read, completion/complete) take turns, one at a time, so that its sampling and elicitation requests reach the right session; server_requests = \"auto\" makes only the requests seen asking take turns", name)
		}
	case mux.StateIdle:
		d.add(OK, "server %s: idle: not running until a session wants it (start = \"lazy\", or stopped after idle_timeout)", name)
	case mux.StateStarting:
		if s.Restarts == 0 && s.LastExit == "" {
			d.add(Note, "server %s: starting; sessions wait for it up to start_timeout (a slow starter: see `mcpmux logs %s`)", name, name)
			return
		}
		d.add(Warn, "server %s: starting again, after %d %s (last exit: %s)%s", name, s.Restarts, plural(s.Restarts, "restart", "restarts"), s.LastExit, serverHint(s))
	case mux.StateBackoff:
		d.add(Warn, "server %s: exited, and is restarted after a pause (%d %s so far; last exit: %s)%s", name, s.Restarts, plural(s.Restarts, "restart", "restarts"), s.LastExit, serverHint(s))
	case mux.StateFailed:
		d.add(Fail, "server %s: failed: it crashed too often and is not restarted until `mcpmux restart %s` (last exit: %s)%s", name, name, s.LastExit, serverHint(s))
	case "isolated":
		d.add(OK, "server %s: a process of its own for each session (share = \"isolated\"): %d %s", name, s.Sessions, plural(s.Sessions, "session", "sessions"))
	case "project":
		d.checkProjects(s)
	default:
		d.add(Note, "server %s: %s", name, s.State)
	}
}

// checkProjects reports a server with one process per project: how many
// run, and each one that does not stay up.
func (d *checkup) checkProjects(s mux.Status) {
	d.add(OK, "server %s: one process per project (share = \"project\"): %d running", s.Name, len(s.Instances))
	for _, in := range s.Instances {
		switch in.State {
		case mux.StateFailed:
			d.add(Fail, "server %s, project %s: failed (last exit: %s); `mcpmux logs %s` has the rest", s.Name, d.tilde(in.Project), in.LastExit, s.Name)
		case mux.StateBackoff:
			d.add(Warn, "server %s, project %s: exited, and is restarted after a pause (last exit: %s); `mcpmux logs %s` has the rest", s.Name, d.tilde(in.Project), in.LastExit, s.Name)
		}
	}
}

// serverHint is what to look at for a server that does not stay up, from
// what its last exit says, then its last stderr line and where the rest is.
func serverHint(s mux.Status) string {
	var hints []string
	switch exit := s.LastExit; {
	case strings.Contains(exit, "not found in PATH"):
		hints = append(hints, "the daemon's PATH has no such command: write command as an absolute path, or start the daemon where PATH has it (a service keeps the PATH it was installed with; an auto-started daemon has the editor's)")
	case strings.Contains(exit, "permission denied"):
		hints = append(hints, "the command is not executable (chmod +x), or is a folder")
	case strings.Contains(exit, "junk_output"):
		hints = append(hints, "it printed lines that are not JSON-RPC on its stdout, more than max_junk_lines in a row: make it log to stderr, or raise max_junk_lines for a startup banner")
	case strings.Contains(exit, "initialize_timeout"):
		hints = append(hints, "it did not answer initialize within initialize_timeout: raise it for a slow starter")
	case strings.Contains(exit, "stalled"):
		hints = append(hints, "it stopped reading its input for write_stall_timeout")
	case strings.Contains(exit, "server exited"), strings.Contains(exit, "exit status"):
		hints = append(hints, "it exits at start: run its command by hand to see why")
	}
	if n := len(s.Stderr); n > 0 {
		hints = append(hints, fmt.Sprintf("its last stderr line: %q", strings.TrimSpace(s.Stderr[n-1])))
	}
	hints = append(hints, fmt.Sprintf("`mcpmux logs %s` has the rest", s.Name))
	return "; " + strings.Join(hints, "; ")
}
