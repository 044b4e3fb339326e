package doctor

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/socket"
)

// SocketDirs are the folders where a daemon of uid may serve
// without a socket_dir: the default folders of this mcpmux (the runtime
// folder, the one in /tmp, the one under the home folder when /tmp's is
// taken) and the one of older versions, whose default followed
// XDG_RUNTIME_DIR. A daemon found in one of them that is not the config's
// own folder was started with another config or in another environment.
func SocketDirs(getenv func(string) string, uid int) []string {
	id := strconv.Itoa(uid)
	dirs := []string{filepath.Join("/run/user", id, "mcpmux"), filepath.Join("/tmp", "mcpmux-"+id)}
	for _, home := range []string{config.Home(uid), getenv("HOME")} {
		if filepath.IsAbs(home) {
			dirs = append(dirs, filepath.Join(home, ".mcpmux", "run"))
		}
	}
	if x := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Join(x, "mcpmux"))
	}
	for i, d := range dirs {
		dirs[i] = filepath.Clean(d)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// checkOtherDaemons looks for daemons of this user in the other folders
// and says which of them serve this config, or may.
func (d *checkup) checkOtherDaemons(ctx context.Context) {
	for _, dir := range d.in.Dirs {
		if filepath.Clean(dir) == filepath.Clean(d.dir) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, daemon.ControlSocket)); err != nil {
			continue // nothing ever served there, or it was cleaned up
		}
		if socket.CheckDir(dir) != nil {
			continue // not a folder of ours: nothing of ours serves there
		}
		st, err := askStatus(ctx, dir)
		if err != nil {
			continue // a socket left by a daemon that is gone
		}
		d.otherDaemon(dir, st)
	}
}

// otherDaemon reports the daemon st found on dir, which is not this
// config's socket folder.
func (d *checkup) otherDaemon(dir string, st daemon.Status) {
	where := d.tilde(dir)
	switch shared := d.sharedNames(st); {
	case st.Config == d.in.Config && d.st != nil:
		d.add(Warn, "a second daemon serves this config, from %s (pid %d, up %s): clients started in another environment reach it, and each of its servers is a second copy; stop it (`kill %d`)", where, st.Pid, st.Uptime, st.Pid)
	case st.Config == d.in.Config:
		d.add(Warn, "this config's daemon serves from %s (pid %d, up %s), not from %s where its clients look (started with another socket_dir, or by an older mcpmux); stop it (`kill %d`) and let the next `mcpmux connect` start one", where, st.Pid, st.Uptime, d.tilde(d.dir), st.Pid)
	case st.Config == "" && len(shared) > 0:
		d.add(Warn, "another daemon serves %s too, from %s (pid %d), and does not say which config (an older mcpmux): if it is this one's, stop it (`kill %d`)", strings.Join(shared, ", "), where, st.Pid, st.Pid)
	default:
		d.add(Note, "another daemon serves from %s (pid %d, config %s)", where, st.Pid, d.tilde(cmp.Or(st.Config, "not said")))
	}
}

// sharedNames are the servers st serves that this config has too.
func (d *checkup) sharedNames(st daemon.Status) []string {
	if d.cfg == nil {
		return nil
	}
	var out []string
	for _, s := range st.Servers {
		if slices.Contains(serverNames(d.cfg), s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}
