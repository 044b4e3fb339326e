package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/mcpmux/mcpmux/internal/statefile"
)

// The auto-started daemon's log file: rotated once it reaches
// LogMax bytes, with LogKeep older files kept
// (mcpmux.log.1 the newest of them), so that it takes at most
// (1+LogKeep) x LogMax of the disk whatever is logged.
const (
	LogMax  = 10 << 20
	LogKeep = 2
)

// LogFile is a log file that rotates itself by size. Each Write goes whole
// into the current file; one that would take it past max first moves the
// files along (path.N-1 to path.N, ..., path to path.1, the oldest
// dropped) and starts an empty one. It is safe for concurrent use.
type LogFile struct {
	path string
	max  int64
	keep int

	repairs []string // what OpenLogFile repaired

	mu   sync.Mutex
	f    *os.File
	size int64
	err  error // why the last rotation failed; writes then go on in the old file
}

// OpenLogFile opens (appending to) or creates the log at path, mode 0600,
// by package statefile's rules. Its folder is made private (a folder of
// this user open to others is set to 0700; another user's is refused). A
// file there that is a symlink, another user's or writable by others is
// removed (the folder is ours) and a new one started. Repairs says what
// was repaired, for the log.
func OpenLogFile(path string, max int64, keep int) (*LogFile, error) {
	l := &LogFile{path: path, max: max, keep: keep}
	note, err := statefile.PrepareDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("daemon log: %w", err)
	}
	if note != "" {
		l.repairs = append(l.repairs, note)
	}
	note, err = l.open()
	if err != nil {
		return nil, err
	}
	if note != "" {
		l.repairs = append(l.repairs, note)
	}
	return l, nil
}

// Repairs are what OpenLogFile repaired to open the log, one sentence
// each.
func (l *LogFile) Repairs() []string { return l.repairs }

// open opens l.path for appending; a file statefile refuses there is
// removed and replaced, and note says so.
func (l *LogFile) open() (note string, err error) {
	f, note, err := statefile.OpenLog(l.path)
	if err != nil {
		return "", fmt.Errorf("daemon log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return "", fmt.Errorf("daemon log: %w", err)
	}
	l.f, l.size = f, fi.Size()
	return note, nil
}

// Write implements io.Writer.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(p)) > l.max {
		l.rotate()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate moves the files along and opens a fresh one; on failure the
// current file stays in use (a full disk must not lose the daemon's log
// altogether), and the failure is written into it once. l.mu is held.
func (l *LogFile) rotate() {
	for i := l.keep - 1; i >= 1; i-- {
		os.Rename(l.path+"."+strconv.Itoa(i), l.path+"."+strconv.Itoa(i+1)) // a missing one is fine
	}
	err := os.Rename(l.path, l.path+".1")
	if l.keep == 0 {
		err = os.Remove(l.path)
	}
	if err == nil {
		old := l.f
		var note string
		if note, err = l.open(); err == nil {
			old.Close()
			l.err = nil
			if note != "" {
				fmt.Fprintf(l.f, "mcpmux: %s\n", note)
			}
			return
		}
		l.f = old
	}
	if l.err == nil {
		fmt.Fprintf(l.f, "mcpmux: cannot rotate the log %s (%v); writing on past %d bytes\n", l.path, err, l.max)
	}
	l.err = err
	l.size = 0 // try again after another max bytes
}

// Close closes the current file.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
