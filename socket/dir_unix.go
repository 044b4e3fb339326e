//go:build unix

package socket

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// PrepareDir makes dir ready to hold sockets. A missing dir is created with
// mode 0700 (and so are its missing parents). An existing one is accepted only
// if it is a real directory (not a symlink), owned by the current uid, with
// full owner permission and no group or other permission bits; otherwise
// PrepareDir returns an error naming the dir, its mode and its owner, which
// matches ErrUnsafeDir. It never changes the mode of a folder it did not
// create: a too-open socket folder is something the user should see, not
// something to paper over.
func PrepareDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		// Ours: the umask may have taken bits away, never added any, so
		// setting 0700 now can only make it usable, not wider.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("socket dir %s: %w", dir, err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	return checkDir(dir)
}

// ErrUnsafeDir: a socket folder was refused because it is not a private
// folder of this user: a symlink, not a directory, owned by another uid, open
// to group or others, or lacking the owner's rwx. The error that carries it
// names the folder, its mode and its owner.
var ErrUnsafeDir = errors.New("socket: unsafe socket folder")

// CheckDir verifies, for a client about to dial the daemon (connect,
// auto-start, status, restart, reload, logs), that dir is a folder
// PrepareDir would accept for serve: a real directory (not a symlink), owned
// by the current uid, rwx for the owner and nothing for group or others. It
// creates and changes nothing. A refusal matches ErrUnsafeDir; a missing dir
// gives an error matching fs.ErrNotExist (no daemon has served there yet).
func CheckDir(dir string) error { return checkDir(dir) }

// checkDir verifies that dir is a directory private to the current user.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	return checkDirInfo(dir, fi, os.Getuid())
}

// checkDirInfo is checkDir on what Lstat said of dir, for the given uid.
func checkDirInfo(dir string, fi fs.FileInfo, uid int) error {
	owner, ok := ownerOf(fi)
	if !ok {
		return refuse(ErrUnsafeDir, "socket dir %s: cannot read its owner", dir)
	}
	perm := fi.Mode().Perm()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuse(ErrUnsafeDir, "socket dir %s is a symlink owned by uid %d; refusing to follow it: use a real directory",
			dir, owner)
	case !fi.IsDir():
		return refuse(ErrUnsafeDir, "socket dir %s is not a directory (mode %v, owned by uid %d)", dir, fi.Mode(), owner)
	case owner != uid:
		return refuse(ErrUnsafeDir, "socket dir %s has mode %#o and is owned by uid %d, not by uid %d; refusing to use it",
			dir, perm, owner, uid)
	case perm&0o077 != 0:
		return refuse(ErrUnsafeDir, "socket dir %s has mode %#o (owner uid %d): group and others must have no access; chmod 700 it or choose another socket_dir",
			dir, perm, owner)
	case perm&0o700 != 0o700:
		return refuse(ErrUnsafeDir, "socket dir %s has mode %#o (owner uid %d): the owner needs rwx; chmod 700 it",
			dir, perm, owner)
	}
	return nil
}

// ownerOf returns the uid that owns the file fi describes.
func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
