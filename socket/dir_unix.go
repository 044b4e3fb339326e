//go:build unix

package socket

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpmux/mcpmux/internal/statefile"
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
// The checks are package statefile's, which the state folder shares.
func checkDirInfo(dir string, fi fs.FileInfo, uid int) error {
	problem, owner := statefile.ExamineDir(fi, uid)
	perm := fi.Mode().Perm()
	switch problem {
	case statefile.DirNoOwner:
		return refuse(ErrUnsafeDir, "socket dir %s: cannot read its owner", dir)
	case statefile.DirSymlink:
		return refuse(ErrUnsafeDir, "socket dir %s is a symlink owned by uid %d; refusing to follow it: use a real directory",
			dir, owner)
	case statefile.DirNotDir:
		return refuse(ErrUnsafeDir, "socket dir %s is not a directory (mode %v, owned by uid %d)", dir, fi.Mode(), owner)
	case statefile.DirForeign:
		return refuse(ErrUnsafeDir, "socket dir %s has mode %#o and is owned by uid %d, not by uid %d; refusing to use it",
			dir, perm, owner, uid)
	case statefile.DirTooWide:
		return refuse(ErrUnsafeDir, "socket dir %s has mode %#o (owner uid %d): group and others must have no access; chmod 700 it or choose another socket_dir",
			dir, perm, owner)
	case statefile.DirNoAccess:
		return refuse(ErrUnsafeDir, "socket dir %s has mode %#o (owner uid %d): the owner needs rwx; chmod 700 it",
			dir, perm, owner)
	}
	return nil
}
