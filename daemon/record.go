package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/internal/statefile"
)

// A daemon says where it serves: once it holds its socket folder (its
// control socket), before any server's socket opens, it writes a
// record in the state folder, daemons/KEY.json, KEY a digest of its config
// file's path, and removes it when it stops. The commands that talk to the
// daemon of a config file (connect, status, logs, restart) read it, so
// they find that daemon whatever their environment, and even while the
// file does not load.

// recordsDir is the folder of the records in the state folder.
const recordsDir = "daemons"

// Record is one daemon's record.
type Record struct {
	Config      string    `json:"config"`     // the config file, as the daemon was given it (absolute)
	SocketDir   string    `json:"socket_dir"` // where it serves
	Pid         int       `json:"pid"`
	Version     string    `json:"version"`
	Started     time.Time `json:"started"`
	Autostarted bool      `json:"autostarted,omitempty"` // started by `mcpmux connect`
}

// SameConfig reports whether two paths name the same config file.
func SameConfig(a, b string) bool { return canonicalConfig(a) == canonicalConfig(b) }

// canonicalConfig is the path a config file's record is keyed by: absolute,
// with symbolic links resolved when they can be, so that every way of
// naming the file finds the same record.
func canonicalConfig(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// recordPath is where the record of the daemon of config is kept.
func recordPath(state, config string) string {
	sum := sha256.Sum256([]byte(canonicalConfig(config)))
	return filepath.Join(state, recordsDir, hex.EncodeToString(sum[:])[:20]+".json")
}

// WriteRecord writes r for r.Config, replacing the file in one rename so
// that no reader sees half of it.
func WriteRecord(state string, r Record) error {
	path := recordPath(state, r.Config)
	if _, err := statefile.PrepareDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	if err := statefile.WriteFile(path, append(b, '\n')); err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	return nil
}

// removeRecord removes the record of config if it is still pid's: another
// daemon of the same file may have written its own since.
func removeRecord(state, config string, pid int) {
	path := recordPath(state, config)
	if r, err := readRecordFile(path); err == nil && r.Pid == pid {
		os.Remove(path)
	}
}

// ReadRecord reads the record of the daemon of config. One whose process
// is gone is removed and not returned.
func ReadRecord(state, config string) (Record, bool) {
	path := recordPath(state, config)
	r, err := readRecordFile(path)
	if err != nil {
		return r, false
	}
	if !processExists(r.Pid) {
		os.Remove(path)
		return r, false
	}
	return r, true
}

// maxRecord bounds a daemon's record: it is a few hundred bytes.
const maxRecord = 64 << 10

// errBadRecord: a record file that does not decode to a record.
var errBadRecord = errors.New("not a daemon record")

// readRecordFile reads one record, by package statefile's rules: one that
// is a symlink, not this user's, writable by others or too large is refused
// (statefile.ErrUnsafe, statefile.ErrTooLarge) without being followed or
// read whole.
func readRecordFile(path string) (Record, error) {
	b, err := statefile.ReadFile(path, maxRecord)
	if err != nil {
		return Record{}, err
	}
	r, err := decodeRecord(b)
	if err != nil {
		return Record{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// decodeRecord is the record b holds, or errBadRecord: one names a process
// and the absolute folder it serves in. A pid beyond a pid_t is refused:
// the kernel would take its low 32 bits (4294967295 is -1, every process).
func decodeRecord(b []byte) (Record, error) {
	var r Record
	if json.Unmarshal(b, &r) != nil || r.Pid <= 0 || r.Pid > math.MaxInt32 || !filepath.IsAbs(r.SocketDir) {
		return Record{}, errBadRecord
	}
	return r, nil
}

// RecordsServing are the records of live daemons that serve in socketDir,
// newest first.
func RecordsServing(state, socketDir string) []Record {
	paths, _ := filepath.Glob(filepath.Join(state, recordsDir, "*.json"))
	var out []Record
	for _, p := range paths {
		if r, err := readRecordFile(p); err == nil && r.SocketDir == socketDir && processExists(r.Pid) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return b.Started.Compare(a.Started) })
	return out
}

// pruneRecords removes the records of daemons whose process is gone (a
// daemon killed without its chance to remove its own), and the files in
// the records' folder that statefile refuses (another user's, a symlink,
// one that others may write, one too large), which it logs.
func pruneRecords(state string, log *slog.Logger) {
	paths, _ := filepath.Glob(filepath.Join(state, recordsDir, "*.json"))
	for _, p := range paths {
		r, err := readRecordFile(p)
		switch {
		case errors.Is(err, statefile.ErrUnsafe):
			log.Warn("removed a daemon record that is refused: not a private file of this user", "error", err)
			os.Remove(p)
		case errors.Is(err, statefile.ErrTooLarge):
			log.Warn("removed a daemon record that is refused: too large", "error", err)
			os.Remove(p)
		case err == nil && !processExists(r.Pid):
			os.Remove(p)
		}
	}
}

// processExists reports whether a process with pid exists (it may be
// another user's).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Describe names the daemon of a record in a few words, for messages.
func (r Record) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d", r.Pid)
	if r.Autostarted {
		b.WriteString(", auto-started by `mcpmux connect`")
	}
	if !r.Started.IsZero() {
		fmt.Fprintf(&b, " at %s", r.Started.Format("2006-01-02 15:04:05"))
	}
	if r.Config != "" {
		fmt.Fprintf(&b, ", config %s", r.Config)
	}
	return b.String()
}

// record writes the daemon's record, once it holds its socket folder; a
// daemon with no state folder or no config file has none.
func (d *Daemon) record() {
	if d.cfg.StateDir == "" || d.cfg.ConfigFile == "" {
		return
	}
	r := Record{
		Config:      d.cfg.ConfigFile,
		SocketDir:   d.cfg.SocketDir,
		Pid:         os.Getpid(),
		Version:     d.cfg.Version,
		Started:     time.Now().Round(time.Second),
		Autostarted: d.cfg.Autostarted,
	}
	pruneRecords(d.cfg.StateDir, d.log)
	if err := WriteRecord(d.cfg.StateDir, r); err != nil {
		d.log.Warn("cannot record where this daemon serves; clients find it from the config file only", "error", err)
		return
	}
	d.recorded = true
}

// unrecord removes the record that record wrote.
func (d *Daemon) unrecord() {
	if d.recorded {
		removeRecord(d.cfg.StateDir, d.cfg.ConfigFile, os.Getpid())
	}
}
