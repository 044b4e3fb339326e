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
// PrepareDir returns an error naming the dir, its mode and its owner. It never
// changes the mode of a folder it did not create: a too-open socket folder is
// something the user should see, not something to paper over.
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

// checkDir verifies that dir is a directory private to the current user.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket dir %s: %w", dir, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("socket dir %s is a symlink; use a real directory", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket dir %s is not a directory (mode %v)", dir, fi.Mode())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("socket dir %s: cannot read its owner", dir)
	}
	perm, owner, uid := fi.Mode().Perm(), int(st.Uid), os.Getuid()
	switch {
	case owner != uid:
		return fmt.Errorf("socket dir %s has mode %#o and is owned by uid %d, not by uid %d; refusing to use it",
			dir, perm, owner, uid)
	case perm&0o077 != 0:
		return fmt.Errorf("socket dir %s has mode %#o (owner uid %d): group and others must have no access; chmod 700 it or choose another socket_dir",
			dir, perm, owner)
	case perm&0o700 != 0o700:
		return fmt.Errorf("socket dir %s has mode %#o (owner uid %d): the owner needs rwx; chmod 700 it",
			dir, perm, owner)
	}
	return nil
}
