//go:build unix

package socket

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mcpmux/mcpmux/internal/statefile"
)

// homeFallback is where, under the user's home folder, mcpmux serves when
// the shared /tmp name is taken. It is short because every socket path must
// fit in sun_path (104 bytes on macOS) together with the home folder's path.
const homeFallback = ".mcpmux/run"

// DefaultDir returns the socket folder mcpmux uses for uid when the config
// names none. It depends on the uid and on the machine's state only (no
// environment), so the daemon and every client compute the same folder
// without talking to each other:
//
//   - /run/user/UID/mcpmux when /run/user/UID is a real directory owned by
//     uid that no one else may write (the per-user runtime folder of
//     systemd-logind; macOS has none);
//   - else /tmp/mcpmux-UID, when nothing is there yet or it is already a
//     private folder of uid;
//   - else, /tmp/mcpmux-UID being squatted (a symlink, a file, another uid's
//     folder, or a folder open to group or others, which mcpmux never makes),
//     home/.mcpmux/run, with note saying in one line that the /tmp name is
//     not ours, who owns it and where mcpmux serves instead.
//
// home returns the user's home folder; it is asked only in the last case
// (looking an account up can cost a client more than the rest of this),
// where an empty or relative one is an error matching ErrUnsafeDir. DefaultDir
// creates nothing: PrepareDir makes the folder, and the fallback's parents,
// when the daemon starts.
func DefaultDir(uid int, home func() string) (dir, note string, err error) {
	return defaultDir("/run/user", "/tmp", uid, home)
}

// defaultDir is DefaultDir with the roots that stand for /run/user and /tmp.
func defaultDir(runUser, tmp string, uid int, home func() string) (dir, note string, err error) {
	id := strconv.Itoa(uid)
	if runtimeDirOf(filepath.Join(runUser, id), uid) {
		return filepath.Join(runUser, id, "mcpmux"), "", nil
	}
	shared := filepath.Join(tmp, "mcpmux-"+id)
	fi, err := os.Lstat(shared)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return shared, "", nil
	case err != nil:
		return "", "", fmt.Errorf("socket dir %s: %w", shared, err)
	case checkDirInfo(shared, fi, uid) == nil:
		return shared, "", nil
	}
	why := squatted(shared, fi, uid)
	homeDir := home()
	if !filepath.IsAbs(homeDir) {
		return "", "", refuse(ErrUnsafeDir, "%s and no home folder is known to serve from instead; set socket_dir", why)
	}
	dir = filepath.Join(homeDir, homeFallback)
	return dir, fmt.Sprintf("%s; mcpmux serves in %s instead", why, dir), nil
}

// runtimeDirOf reports whether dir is a real directory owned by uid that
// neither group nor others may write, so that a folder made in it is safe
// from other users.
func runtimeDirOf(dir string, uid int) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	owner, ok := statefile.Owner(fi)
	return ok && owner == uid
}

// squatted says what is at shared instead of a private folder of uid.
func squatted(shared string, fi fs.FileInfo, uid int) string {
	owner, ok := statefile.Owner(fi)
	whose := "an unknown uid"
	if ok {
		whose = "uid " + strconv.Itoa(owner)
	}
	var what string
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		what = "a symlink owned by " + whose
	case fi.IsDir():
		what = fmt.Sprintf("a folder owned by %s, mode %#o", whose, fi.Mode().Perm())
	case fi.Mode().IsRegular():
		what = "a file owned by " + whose
	default:
		what = fmt.Sprintf("not a folder but mode %v, owned by %s", fi.Mode(), whose)
	}
	if ok && owner == uid {
		return fmt.Sprintf("%s is not a private mcpmux folder (%s)", shared, what)
	}
	return fmt.Sprintf("%s is not ours (%s)", shared, what)
}
