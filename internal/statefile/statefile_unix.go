//go:build unix

package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe: a path in the state folder was refused because it is not a
// private file or folder of this user: a symlink, not a regular file (or
// not a directory), owned by another uid, or open to others.
var ErrUnsafe = errors.New("statefile: not a private file of this user")

// ErrTooLarge: a file was refused because it is larger than its reader's
// bound; nothing of it was read.
var ErrTooLarge = errors.New("statefile: file too large")

// DirProblem is what is wrong with a folder meant to be private.
type DirProblem int

const (
	DirOK       DirProblem = iota
	DirNoOwner             // its owner cannot be read
	DirSymlink             // a symbolic link
	DirNotDir              // not a directory
	DirForeign             // owned by another uid
	DirTooWide             // group or others have some access
	DirNoAccess            // the owner lacks rwx
)

// Owner returns the uid that owns the file fi describes.
func Owner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// ExamineDir says what, if anything, keeps the folder Lstat described as fi
// from being private to uid, and who owns it.
func ExamineDir(fi fs.FileInfo, uid int) (DirProblem, int) {
	owner, ok := Owner(fi)
	perm := fi.Mode().Perm()
	switch {
	case !ok:
		return DirNoOwner, 0
	case fi.Mode()&fs.ModeSymlink != 0:
		return DirSymlink, owner
	case !fi.IsDir():
		return DirNotDir, owner
	case owner != uid:
		return DirForeign, owner
	case perm&0o077 != 0:
		return DirTooWide, owner
	case perm&0o700 != 0o700:
		return DirNoAccess, owner
	}
	return DirOK, owner
}

// PrepareDir makes dir ready to hold state: a missing one is created 0700
// (and its missing parents). An existing one of this user whose mode is
// not 0700 is set to 0700, and repaired says so (for the log). Any other,
// a symlink, not a directory or another uid's, is refused with an error
// that matches ErrUnsafe and names it.
func PrepareDir(dir string) (repaired string, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("state folder %s: %w", dir, err)
	}
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		// The umask may have taken bits away, never added any.
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", fmt.Errorf("state folder %s: %w", dir, err)
		}
		return "", nil
	case !errors.Is(err, fs.ErrExist):
		return "", fmt.Errorf("state folder %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("state folder %s: %w", dir, err)
	}
	problem, owner := ExamineDir(fi, os.Getuid())
	perm := fi.Mode().Perm()
	switch problem {
	case DirOK:
		return "", nil
	case DirTooWide, DirNoAccess:
		// Ours: only its mode is wrong, and we may set it. (Chmod follows
		// no link here: Lstat said it is a directory.)
		if err := os.Chmod(dir, 0o700); err != nil {
			return "", fmt.Errorf("state folder %s has mode %#o and cannot be set to 0700: %w", dir, perm, err)
		}
		return fmt.Sprintf("state folder %s had mode %#o; set it to 0700", dir, perm), nil
	case DirSymlink:
		return "", fmt.Errorf("state folder %s is a symlink owned by uid %d; refusing to follow it: %w", dir, owner, ErrUnsafe)
	case DirNotDir:
		return "", fmt.Errorf("state folder %s is not a directory (mode %v, owned by uid %d): %w", dir, fi.Mode(), owner, ErrUnsafe)
	case DirForeign:
		return "", fmt.Errorf("state folder %s has mode %#o and is owned by uid %d, not by uid %d; refusing to use it: %w",
			dir, perm, owner, os.Getuid(), ErrUnsafe)
	}
	return "", fmt.Errorf("state folder %s: cannot read its owner: %w", dir, ErrUnsafe)
}

// CheckInfo is the check Stat makes, on what Lstat (or a directory
// listing) said of path.
func CheckInfo(path string, fi fs.FileInfo) error { return checkFile(path, fi) }

// checkFile refuses a file that is not a regular file of this user that
// group and others cannot write.
func checkFile(path string, fi fs.FileInfo) error {
	owner, ok := Owner(fi)
	perm := fi.Mode().Perm()
	switch {
	case !ok:
		return fmt.Errorf("%s: cannot read its owner: %w", path, ErrUnsafe)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink owned by uid %d; refusing to follow it: %w", path, owner, ErrUnsafe)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (mode %v, owned by uid %d): %w", path, fi.Mode(), owner, ErrUnsafe)
	case owner != os.Getuid():
		return fmt.Errorf("%s is owned by uid %d, not by uid %d: %w", path, owner, os.Getuid(), ErrUnsafe)
	case perm&0o022 != 0:
		return fmt.Errorf("%s has mode %#o: others may write it: %w", path, perm, ErrUnsafe)
	}
	return nil
}

// openChecked opens path with flag, never through a symlink and never
// blocking on a FIFO, and checks what it opened.
func openChecked(path string, flag int) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK) {
			// O_NOFOLLOW met a symlink (EMLINK: FreeBSD's way of saying so).
			return nil, nil, fmt.Errorf("%s is a symlink; refusing to follow it: %w", path, ErrUnsafe)
		}
		if errors.Is(err, fs.ErrPermission) {
			// Another user's file we may not open is refused as such.
			if fi, lerr := os.Lstat(path); lerr == nil {
				if cerr := checkFile(path, fi); cerr != nil {
					return nil, nil, cerr
				}
			}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkFile(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Open opens path for reading, when it is a regular file of this user
// that others cannot write. A missing file gives an error matching
// fs.ErrNotExist; a refused one matches ErrUnsafe.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return openChecked(path, os.O_RDONLY)
}

// ReadFile reads path as Open opens it, refusing (ErrTooLarge) a file of
// more than max bytes before reading any of it. A file that grows while it
// is read is refused too: no more than max+1 bytes are ever read.
func ReadFile(path string, max int64) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, fmt.Errorf("%s has %d bytes, more than %d: %w", path, fi.Size(), max, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s has more than %d bytes: %w", path, max, ErrTooLarge)
	}
	return b, nil
}

// OpenAppend opens path for appending, creating it 0600 when missing,
// when it is a regular file of this user that others cannot write.
func OpenAppend(path string) (*os.File, error) {
	f, _, err := openChecked(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK was for the open only.
	if err := setBlocking(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenLog is OpenAppend for a log file in a folder of this user: a file
// there that is refused (a symlink, another user's, writable by others) is
// removed, which follows no link and leaves what it pointed to alone, and
// a new one started; note then says so, for the log.
func OpenLog(path string) (f *os.File, note string, err error) {
	f, err = OpenAppend(path)
	if errors.Is(err, ErrUnsafe) {
		if rerr := os.Remove(path); rerr != nil {
			return nil, "", fmt.Errorf("%w (and cannot remove it: %v)", err, rerr)
		}
		note = fmt.Sprintf("removed a log file that was refused and started a new one: %v", err)
		f, err = OpenAppend(path)
	}
	if err != nil {
		return nil, "", err
	}
	return f, note, nil
}

// setBlocking clears O_NONBLOCK: on a regular file it changes nothing,
// but a log file should write as any file does.
func setBlocking(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}

// Stat is Lstat of path, refused (ErrUnsafe) when it is not a regular file
// of this user that others cannot write.
func Stat(path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if err := checkFile(path, fi); err != nil {
		return nil, err
	}
	return fi, nil
}

// WriteFile replaces path with b, whole or not at all: b goes to a file
// created exclusively, 0600, under an unpredictable name in path's folder,
// which is then renamed onto path (a rename replaces a symlink at path, it
// never writes through one).
func WriteFile(path string, b []byte) error {
	dir, name := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
