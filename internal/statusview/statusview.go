// Package statusview prints what `mcpmux status` shows of a daemon's
// status: one line a server, cut to the terminal's width so that twenty
// servers fit a screen, and one server in full.
package statusview

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/mux"
)

// Width is the width to cut lines to: $COLUMNS when it is a number, else
// the width of the terminal f is, else 0 (no cut).
func Width(f *os.File) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 0
	}
	return int(ws.Col)
}

// Table prints the daemon's head line and one line a server; a server
// that cannot start for want of resources, and endpoints with sessions,
// get a line each after. Lines are cut to width (0: not cut).
func Table(w io.Writer, st daemon.Status, width int) error {
	head := fmt.Sprintf("mcpmux %s, pid %d, up %s, %d goroutines, %.1f MiB resident", st.Version, st.Pid, st.Uptime, st.Goroutines, float64(st.RSSBytes)/(1<<20))
	if st.Config != "" {
		head += ", config " + st.Config
	}
	lines := []string{cut(head, width)}
	if len(st.Servers) == 0 {
		lines = append(lines, "warning: no servers: the config has no [servers.NAME] table; add one, then `mcpmux reload`")
	}
	rows := [][]string{{"SERVER", "STATE", "PID", "UPTIME", "ERA", "SESSIONS", "IN FLIGHT", "RESTARTS", "LAST EXIT"}}
	for _, s := range st.Servers {
		rows = append(rows, []string{s.Name, state(s), pid(s.Pid), dash(s.Uptime), dash(s.Era),
			strconv.Itoa(s.Sessions), strconv.Itoa(s.Inflight), strconv.Itoa(s.Restarts), dash(oneLine(s.LastExit))})
	}
	lines = append(lines, columns(rows, width)...)
	for _, s := range st.Servers {
		if s.Shortage != "" {
			lines = append(lines, cut(s.Name+" cannot start for want of the machine's resources (no crash: it is tried again with backoff): "+s.Shortage, width))
		}
	}
	var used []string
	for _, e := range st.Endpoints {
		if e.Sessions > 0 {
			used = append(used, fmt.Sprintf("%s (%d sessions)", e.Name, e.Sessions))
		}
	}
	if len(used) > 0 {
		lines = append(lines, cut("endpoints in use: "+strings.Join(used, ", "), width))
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// columns lays rows out in columns two spaces apart, the last cut so that
// each line fits width.
func columns(rows [][]string, width int) []string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r[:len(r)-1] {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r[:len(r)-1] {
			b.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))+2))
		}
		b.WriteString(r[len(r)-1])
		out = append(out, cut(b.String(), width))
	}
	return out
}

// cut shortens s to width runes, marking the cut with "…".
func cut(s string, width int) string {
	r := []rune(s)
	if width <= 0 || len(r) <= width {
		return s
	}
	if width == 1 {
		return "…"
	}
	return string(r[:width-1]) + "…"
}

// state is a server's state, with how long it has been starting.
func state(s mux.Status) string {
	if s.StartingFor != "" {
		return string(s.State) + " " + s.StartingFor
	}
	return string(s.State)
}

// oneLine joins a multi-line text with " / ".
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " / ")), " ")
}

func pid(p int) string {
	if p > 0 {
		return strconv.Itoa(p)
	}
	return "-"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// protocolOf is a revision with its era.
func protocolOf(version, era string) string {
	if version == "" {
		return "-"
	}
	return version + " (" + era + ")"
}

// Server prints one server in full: its state and process, what takes
// turns, its projects' processes, its sessions and its last stderr lines.
func Server(w io.Writer, st daemon.Status, name string) error {
	var s *mux.Status
	for i := range st.Servers {
		if st.Servers[i].Name == name {
			s = &st.Servers[i]
		}
	}
	if s == nil {
		names := make([]string, len(st.Servers))
		for i, s := range st.Servers {
			names[i] = s.Name
		}
		return fmt.Errorf("no server named %q: the daemon serves %s", name, strings.Join(names, ", "))
	}
	fmt.Fprintf(w, "%s: %s, pid %s, up %s, protocol %s, %d restarts, %d sessions, %d in flight\n",
		s.Name, state(*s), pid(s.Pid), dash(s.Uptime), protocolOf(s.Protocol, s.Era), s.Restarts, s.Sessions, s.Inflight)
	if s.LastExit != "" {
		fmt.Fprintf(w, "last exit: %s\n", s.LastExit)
	}
	if s.Shortage != "" {
		fmt.Fprintf(w, "cannot start for want of the machine's resources (no crash: it is tried again with backoff): %s\n", s.Shortage)
	}
	turns(w, *s)
	dormant(w, *s)
	if len(s.Instances) > 0 {
		fmt.Fprintln(w, "\none process per project:")
		for _, in := range s.Instances {
			fmt.Fprintf(w, "  %s  %s  pid %s  %d sessions\n", in.Project, in.State, pid(in.Pid), in.Sessions)
		}
	}
	if len(s.SessionList) > 0 {
		fmt.Fprintln(w)
		if err := sessions(w, []mux.Status{*s}); err != nil {
			return err
		}
	}
	if len(s.Stderr) > 0 {
		fmt.Fprintf(w, "\nstderr (last %d lines):\n", len(s.Stderr))
		for _, l := range s.Stderr {
			fmt.Fprintln(w, "  "+strings.TrimRight(l, "\r\n"))
		}
	}
	return nil
}

// turns says which of a server's requests take turns.
func turns(w io.Writer, s mux.Status) {
	if s.Serialized {
		fmt.Fprintf(w, "%s: serialized as a whole: every interactive request takes turns\n", s.Name)
	}
	if len(s.Asks) > 0 {
		fmt.Fprintf(w, "%s: these requests cause the server's own, and take turns: %s\n", s.Name, strings.Join(s.Asks, ", "))
	}
}

// Sessions lists every server's sessions (who, over what, in which
// protocol, how long, with how much in flight), then what takes turns.
func Sessions(w io.Writer, st daemon.Status) error {
	fmt.Fprintln(w)
	if err := sessions(w, st.Servers); err != nil {
		return err
	}
	for _, s := range st.Servers {
		if s.Serialized || len(s.Asks) > 0 || s.Dormant > 0 {
			fmt.Fprintln(w)
			turns(w, s)
			dormant(w, s)
		}
	}
	return nil
}

// dormant counts a server's dormant HTTP sessions, if any.
func dormant(w io.Writer, s mux.Status) {
	if s.Dormant > 0 {
		fmt.Fprintf(w, "%s: %d dormant HTTP sessions (their clients went quiet without a GET stream; each is made again if its client comes back)\n", s.Name, s.Dormant)
	}
}

func sessions(w io.Writer, servers []mux.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSESSION\tTRANSPORT\tPEER\tCLIENT\tPROTOCOL\tAGE\tIN FLIGHT")
	for _, s := range servers {
		for _, ss := range s.SessionList {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\n", s.Name, ss.ID, ss.Transport, dash(ss.Peer), dash(ss.Client), protocolOf(ss.Protocol, ss.Era), ss.Age, ss.Inflight)
		}
	}
	return tw.Flush()
}
