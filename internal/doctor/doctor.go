package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/editors"
	"github.com/mcpmux/mcpmux/socket"
)

// Mark opens a finding's line: how much it needs attention.
type Mark string

const (
	OK   Mark = "ok"
	Note Mark = "note" // worth knowing; nothing to do
	Warn Mark = "warn" // needs attention
	Fail Mark = "fail" // something does not work
)

// Finding is one line of the report.
type Finding struct {
	Mark Mark
	Text string
}

// String is the finding as doctor prints it: the mark, padded, then the text.
func (f Finding) String() string { return fmt.Sprintf("%-4s  %s", f.Mark, f.Text) }

// Report is the findings of one run, in the order of the checks.
type Report []Finding

// String is the report as doctor prints it, one line per finding.
func (r Report) String() string {
	var b strings.Builder
	for _, f := range r {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Err says how many findings need attention (warn or fail); nil when none.
func (r Report) Err() error {
	n := 0
	for _, f := range r {
		if f.Mark == Warn || f.Mark == Fail {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("doctor: %d %s need%s attention", n, plural(n, "finding", "findings"), plural(n, "s", ""))
}

// Input is what doctor checks and what it knows of the machine.
type Input struct {
	Config  string              // the config file, absolute
	Getenv  func(string) string // the environment doctor runs in
	GOOS    string
	UID     int
	Cwd     string   // the folder doctor runs in: the editors' project files there are read
	Dirs    []string // where a daemon of this user may serve (see SocketDirs)
	Version string   // this mcpmux's version
}

// checkup is one run of the checks; each check adds to what the next knows.
type checkup struct {
	in  Input
	r   Report
	cfg *config.Config // nil when it does not load
	dir string         // the socket folder this config's clients use
	// dirRefused: the socket folder is not safe to use; nothing is sent there.
	dirRefused bool
	st         *daemon.Status // the daemon on dir; nil when none answers
}

// Run runs the checks in order: the config, its socket folder, the daemon
// there and its servers, other daemons of this user, the editors' files.
func Run(ctx context.Context, in Input) Report {
	d := &checkup{in: in}
	d.checkConfig()
	d.checkSocketDir()
	d.checkDaemon(ctx)
	d.checkServers()
	d.checkOtherDaemons(ctx)
	d.checkEditors()
	return d.r
}

func (d *checkup) add(m Mark, format string, args ...any) {
	d.r = append(d.r, Finding{m, fmt.Sprintf(format, args...)})
}

// checkConfig loads the config, and finds the socket folder its clients
// use even when it does not load.
func (d *checkup) checkConfig() {
	path := d.in.Config
	cfg, err := config.Load(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.add(Fail, "config %s does not exist: %s", d.tilde(path), config.MissingAdvice)
	case err != nil:
		for _, line := range strings.Split(err.Error(), "\n") {
			d.add(Fail, "config: %s", line)
		}
		d.add(Note, "until it loads, serve, connect, status, logs, restart and reload refuse to run; a running daemon keeps the config it loaded")
	case len(cfg.Servers) == 0:
		d.add(Warn, "config %s has no servers: mcpmux serves nothing until it has a [servers.NAME] table", d.tilde(path))
	default:
		d.add(OK, "config %s: %d %s: %s", d.tilde(path), len(cfg.Servers), plural(len(cfg.Servers), "server", "servers"), strings.Join(serverNames(cfg), ", "))
	}
	if cfg != nil {
		d.cfg, d.dir = cfg, cfg.Listen.SocketDir
		if note := cfg.Listen.SocketDirNote; note != "" {
			d.add(Warn, "socket folder: %s", note)
		}
		return
	}
	// A config that does not load: its socket_dir if that much can be
	// read, else the default folder.
	if o, _ := config.Skim(path); o.SocketDir != "" {
		d.dir = o.SocketDir
	} else {
		d.dir, _ = config.DefaultSocketDir(d.in.UID)
	}
}

// checkEditors reports, for each editor file there is, the servers it
// reaches through mcpmux and what would keep them from working.
func (d *checkup) checkEditors() {
	in := editors.Checkup{Getenv: d.in.Getenv, GOOS: d.in.GOOS, Cwd: d.in.Cwd, Config: d.in.Config, Tilde: d.tilde}
	// The editor's environment is not doctor's: assume it has no MCPMUX_CONFIG.
	in.DefaultConfig, _ = config.DefaultPath(func(k string) string {
		if k == "MCPMUX_CONFIG" {
			return ""
		}
		return d.in.Getenv(k)
	})
	if d.cfg != nil {
		in.Servers = serverNames(d.cfg)
		for _, e := range d.cfg.Endpoints {
			in.Endpoints = append(in.Endpoints, e.Name)
		}
	}
	marks := map[editors.Level]Mark{editors.OK: OK, editors.Note: Note, editors.Warn: Warn}
	for _, f := range editors.Check(in) {
		d.add(marks[f.Level], "%s", f.Text)
	}
}

func serverNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		names[i] = s.Name()
	}
	return names
}

// checkSocketDir checks the socket folder as every client does before it
// dials: a real folder, this user's alone.
func (d *checkup) checkSocketDir() {
	if d.dir == "" {
		d.add(Fail, "socket folder: none can be found: set socket_dir in [listen]")
		d.dirRefused = true
		return
	}
	err := socket.CheckDir(d.dir)
	switch {
	case err == nil:
		d.add(OK, "socket folder %s: yours, mode 0700", d.tilde(d.dir))
	case errors.Is(err, fs.ErrNotExist):
		d.add(Note, "socket folder %s does not exist yet: no daemon has served there (the daemon makes it)", d.tilde(d.dir))
	default:
		d.add(Fail, "%v", err)
		d.dirRefused = true
	}
}

// checkDaemon asks the daemon on the socket folder for its status.
func (d *checkup) checkDaemon(ctx context.Context) {
	if d.dirRefused {
		d.add(Note, "daemon: not asked: mcpmux sends nothing to a socket folder it refuses")
		return
	}
	st, err := askStatus(ctx, d.dir)
	if err != nil {
		d.noDaemon(err)
		return
	}
	d.st = &st
	d.add(OK, "daemon: pid %d on %s, mcpmux %s, up %s%s, config %s", st.Pid, d.tilde(d.dir), st.Version, st.Uptime, since(st.Uptime), d.tilde(cmp.Or(st.Config, "(not said: an older mcpmux)")))
	switch {
	case st.Config != "" && st.Config != d.in.Config:
		d.add(Warn, "the daemon on %s serves %s, not %s: two configs share one socket folder, so this one's clients reach the other's servers; give one of them its own socket_dir", d.tilde(d.dir), d.tilde(st.Config), d.tilde(d.in.Config))
	case d.cfg == nil:
		d.add(Note, "the daemon keeps serving the config it loaded; `mcpmux reload` refuses this one until it loads")
	default:
		d.compareServers(st)
	}
	if me := d.in.Version; st.Version != me {
		d.add(Note, "the daemon runs mcpmux %s and this is %s: restart the daemon to run this one", st.Version, me)
	}
}

// noDaemon reports that no daemon answered on the socket folder.
func (d *checkup) noDaemon(err error) {
	if r := socket.Refusal(err); r != nil {
		d.add(Fail, "daemon: %v", r)
		return
	}
	if d.cfg == nil || d.cfg.Daemon.Autostart {
		d.add(Note, "daemon: none serves %s; the first `mcpmux connect` starts one (or run `mcpmux serve`)", d.tilde(d.dir))
		return
	}
	d.add(Warn, "daemon: none serves %s, and auto-start is off (autostart = false): start one with `mcpmux serve --config %s`, or as a service (`mcpmux service install`)", d.tilde(d.dir), d.in.Config)
}

// compareServers finds the servers that a reload would add or remove.
func (d *checkup) compareServers(st daemon.Status) {
	served := make([]string, len(st.Servers))
	for i, s := range st.Servers {
		served[i] = s.Name
	}
	var missing, extra []string
	for _, n := range serverNames(d.cfg) {
		if !slices.Contains(served, n) {
			missing = append(missing, n)
		}
	}
	for _, n := range served {
		if !slices.Contains(serverNames(d.cfg), n) {
			extra = append(extra, n)
		}
	}
	if len(missing) > 0 {
		d.add(Warn, "the daemon does not serve %s, which the config has (added since it started?): `mcpmux reload`", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		d.add(Note, "the daemon still serves %s, which the config no longer has: `mcpmux reload` stops %s", strings.Join(extra, ", "), plural(len(extra), "it", "them"))
	}
}

// askStatus is GET /status on the control socket of dir, bounded.
func askStatus(ctx context.Context, dir string) (daemon.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return daemon.NewClient(dir).Status(ctx)
}

// since is " (since 2026-05-20 10:02)" for an uptime status reported.
func since(uptime string) string {
	up, err := time.ParseDuration(uptime)
	if err != nil {
		return ""
	}
	return " (since " + time.Now().Add(-up).Format("2006-01-02 15:04") + ")"
}

// tilde writes a path under the home folder as ~/...
func (d *checkup) tilde(path string) string {
	home := d.in.Getenv("HOME")
	if home == "" || home == "/" || !filepath.IsAbs(path) {
		return path
	}
	if rel, ok := strings.CutPrefix(path, filepath.Clean(home)+"/"); ok {
		return "~/" + rel
	}
	return path
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
