package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/editors"
	"github.com/mcpmux/mcpmux/socket"
)

// `mcpmux doctor` looks at everything that commonly goes wrong between a
// config file, a daemon and the editors, and says what it finds in one
// plain line each, with what to do. It changes nothing. It exits non-zero
// when a line needs attention (warn or fail).

// doctorEnv is what doctor looks at besides the config: the machine
// (setupEnv), the folder it runs in (for the editors' project files), and
// the folders where a daemon of this user may serve.
type doctorEnv struct {
	setupEnv
	cwd        string
	socketDirs func() []string
}

func hostDoctorEnv() doctorEnv {
	env := doctorEnv{setupEnv: hostSetupEnv()}
	env.cwd, _ = os.Getwd()
	env.socketDirs = func() []string { return candidateSocketDirs(env.getenv, env.uid) }
	return env
}

func newDoctorCmd() *cobra.Command { return newDoctorCmdWith(hostDoctorEnv()) }

func newDoctorCmdWith(env doctorEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the config, the daemon, its socket folder, its servers and the editors' configs, and say what needs attention",
		Long: `Checks what commonly goes wrong and prints one line for each finding:
the config file loads (or where it does not), which daemon serves it (where,
since when, with which config file), the socket folder's owner and mode,
other daemons of this user serving the same config from another folder, each
server's state and last exit with a hint, and which editors' config files
start "mcpmux connect" for which servers. It changes nothing.

Each line starts with ok, note, warn or fail. The exit status is 1 when a
line says warn or fail.`,
		Args: cobra.NoArgs,
	}
	configPath := configPathFlag(cmd, env.getenv)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		path, _, err := configPath()
		if err != nil {
			return err
		}
		d := &doctor{env: env, path: path, r: report{w: cmd.OutOrStdout()}}
		return d.run(cmd.Context())
	}
	return cmd
}

// mark opens a line of the report.
type mark string

const (
	markOK   mark = "ok"
	markNote mark = "note" // worth knowing; nothing to do
	markWarn mark = "warn" // needs attention
	markFail mark = "fail" // something does not work
)

// report prints the findings and counts those that need attention.
type report struct {
	w         io.Writer
	attention int
}

func (r *report) add(m mark, format string, args ...any) {
	if m == markWarn || m == markFail {
		r.attention++
	}
	fmt.Fprintf(r.w, "%-4s  %s\n", m, fmt.Sprintf(format, args...))
}

// doctor is one run of the checks; each check adds to what the next knows.
type doctor struct {
	env  doctorEnv
	r    report
	path string         // the config file, absolute
	cfg  *config.Config // nil when it does not load
	dir  string         // the socket folder this config's clients use
	// dirRefused: the socket folder is not safe to use; nothing is sent there.
	dirRefused bool
	st         *daemon.Status // the daemon on dir; nil when none answers
}

func (d *doctor) run(ctx context.Context) error {
	d.checkConfig()
	d.checkSocketDir()
	d.checkDaemon(ctx)
	d.checkServers()
	d.checkOtherDaemons(ctx)
	d.checkEditors()
	if n := d.r.attention; n > 0 {
		return fmt.Errorf("doctor: %d %s need%s attention", n, plural(n, "finding", "findings"), plural(n, "s", ""))
	}
	fmt.Fprintln(d.r.w, "all is well")
	return nil
}

// checkConfig loads the config, and finds the socket folder its clients
// use even when it does not load.
func (d *doctor) checkConfig() {
	cfg, err := config.Load(d.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.r.add(markFail, "config %s does not exist: write one (the README's quick start has one), or pass --config FILE", d.tilde(d.path))
	case err != nil:
		for _, line := range strings.Split(err.Error(), "\n") {
			d.r.add(markFail, "config: %s", line)
		}
		d.r.add(markNote, "until it loads, serve, connect, status, logs, restart and reload refuse to run; a running daemon keeps the config it loaded")
	case len(cfg.Servers) == 0:
		d.r.add(markWarn, "config %s has no servers: mcpmux serves nothing until it has a [servers.NAME] table", d.tilde(d.path))
	default:
		d.r.add(markOK, "config %s: %d %s: %s", d.tilde(d.path), len(cfg.Servers), plural(len(cfg.Servers), "server", "servers"), strings.Join(serverNames(cfg), ", "))
	}
	if cfg != nil {
		d.cfg, d.dir = cfg, cfg.Listen.SocketDir
		if note := cfg.Listen.SocketDirNote; note != "" {
			d.r.add(markWarn, "socket folder: %s", note)
		}
		return
	}
	// A config that does not load: its socket_dir if that much can be
	// read, else the default folder.
	if d.dir = socketDirOf(d.path); d.dir == "" {
		d.dir, _ = config.DefaultSocketDir(d.env.uid)
	}
}

// checkEditors reports, for each editor file there is, the servers it
// reaches through mcpmux and what would keep them from working.
func (d *doctor) checkEditors() {
	in := editors.Checkup{Getenv: d.env.getenv, GOOS: d.env.goos, Cwd: d.env.cwd, Config: d.path, Tilde: d.tilde}
	// The editor's environment is not doctor's: assume it has no MCPMUX_CONFIG.
	in.DefaultConfig, _ = config.DefaultPath(func(k string) string {
		if k == "MCPMUX_CONFIG" {
			return ""
		}
		return d.env.getenv(k)
	})
	if d.cfg != nil {
		in.Servers = serverNames(d.cfg)
	}
	marks := map[editors.Level]mark{editors.OK: markOK, editors.Note: markNote, editors.Warn: markWarn}
	for _, f := range editors.Check(in) {
		d.r.add(marks[f.Level], "%s", f.Text)
	}
}

// socketDirOf reads [listen] socket_dir from a config file without
// checking anything else, resolved as config.Load resolves it; "" when it
// cannot be read.
func socketDirOf(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) > config.MaxFileSize {
		return ""
	}
	var doc struct {
		Listen struct {
			SocketDir string `toml:"socket_dir"`
		} `toml:"listen"`
	}
	if toml.Unmarshal(data, &doc) != nil || doc.Listen.SocketDir == "" {
		return ""
	}
	if dir := doc.Listen.SocketDir; filepath.IsAbs(dir) {
		return filepath.Clean(dir)
	}
	return filepath.Join(filepath.Dir(path), doc.Listen.SocketDir)
}

func serverNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		names[i] = s.Name
	}
	return names
}

// checkSocketDir checks the socket folder as every client does before it
// dials: a real folder, this user's alone.
func (d *doctor) checkSocketDir() {
	if d.dir == "" {
		d.r.add(markFail, "socket folder: none can be found: set socket_dir in [listen]")
		d.dirRefused = true
		return
	}
	err := socket.CheckDir(d.dir)
	switch {
	case err == nil:
		d.r.add(markOK, "socket folder %s: yours, mode 0700", d.tilde(d.dir))
	case errors.Is(err, fs.ErrNotExist):
		d.r.add(markNote, "socket folder %s does not exist yet: no daemon has served there (the daemon makes it)", d.tilde(d.dir))
	default:
		d.r.add(markFail, "%v", err)
		d.dirRefused = true
	}
}

// checkDaemon asks the daemon on the socket folder for its status.
func (d *doctor) checkDaemon(ctx context.Context) {
	if d.dirRefused {
		d.r.add(markNote, "daemon: not asked: mcpmux sends nothing to a socket folder it refuses")
		return
	}
	st, err := askStatus(ctx, d.dir)
	if err != nil {
		d.noDaemon(err)
		return
	}
	d.st = &st
	d.r.add(markOK, "daemon: pid %d on %s, mcpmux %s, up %s%s, config %s", st.Pid, d.tilde(d.dir), st.Version, st.Uptime, since(st.Uptime), d.tilde(cmp.Or(st.Config, "(not said: an older mcpmux)")))
	switch {
	case st.Config != "" && st.Config != d.path:
		d.r.add(markWarn, "the daemon on %s serves %s, not %s: two configs share one socket folder, so this one's clients reach the other's servers; give one of them its own socket_dir", d.tilde(d.dir), d.tilde(st.Config), d.tilde(d.path))
	case d.cfg == nil:
		d.r.add(markNote, "the daemon keeps serving the config it loaded; `mcpmux reload` refuses this one until it loads")
	default:
		d.compareServers(st)
	}
	if me := mcpmuxVersion(); st.Version != me {
		d.r.add(markNote, "the daemon runs mcpmux %s and this is %s: restart the daemon to run this one", st.Version, me)
	}
}

// noDaemon reports that no daemon answered on the socket folder.
func (d *doctor) noDaemon(err error) {
	if r := socket.Refusal(err); r != nil {
		d.r.add(markFail, "daemon: %v", r)
		return
	}
	if d.cfg == nil || d.cfg.Daemon.Autostart {
		d.r.add(markNote, "daemon: none serves %s; the first `mcpmux connect` starts one (or run `mcpmux serve`)", d.tilde(d.dir))
		return
	}
	d.r.add(markWarn, "daemon: none serves %s, and auto-start is off (autostart = false): start one with `mcpmux serve --config %s`, or as a service (`mcpmux service install`)", d.tilde(d.dir), d.path)
}

// compareServers finds the servers that a reload would add or remove.
func (d *doctor) compareServers(st daemon.Status) {
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
		d.r.add(markWarn, "the daemon does not serve %s, which the config has (added since it started?): `mcpmux reload`", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		d.r.add(markNote, "the daemon still serves %s, which the config no longer has: `mcpmux reload` stops %s", strings.Join(extra, ", "), plural(len(extra), "it", "them"))
	}
}

// askStatus is GET /status on the control socket of dir, bounded.
func askStatus(ctx context.Context, dir string) (daemon.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var st daemon.Status
	err := control(ctx, dir, http.MethodGet, "/status", &st)
	return st, err
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
func (d *doctor) tilde(path string) string {
	home := d.env.getenv("HOME")
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
