package streamable

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/internal/statefile"
)

// Record is what a Store keeps of one HTTP session of the 2025 binding:
// enough for a daemon started later to make the session again when its
// client comes back with the same Mcp-Session-Id.
type Record struct {
	ID     string `json:"id"`
	Server string `json:"server"`
	// Initialize is the client's initialize request, as it sent it.
	Initialize json.RawMessage `json:"initialize"`
	// Initialized: the client sent notifications/initialized.
	Initialized bool `json:"initialized,omitempty"`
	// Level is the params of its last logging/setLevel.
	Level json.RawMessage `json:"level,omitempty"`
	// Subscriptions are the params of each resources/subscribe not
	// unsubscribed, by URI.
	Subscriptions map[string]json.RawMessage `json:"subscriptions,omitempty"`
	// Folder is the client's folder its roots told, for a server with
	// share = "project": a later daemon serves the session in that
	// project at once, whatever its first message.
	Folder string `json:"folder,omitempty"`
}

// Store keeps Records across runs of the daemon.
type Store interface {
	// Save writes r whole, or leaves the previous record of its id.
	Save(r *Record) error
	// Load returns the record of id; an error wrapping fs.ErrNotExist
	// when there is none, or it expired.
	Load(id string) (*Record, error)
	// Touch notes that the session of id had a request now.
	Touch(id string)
	// Delete forgets the record of id.
	Delete(id string)
}

// FileStore keeps each Record in a file of its own in a private folder
// (0700, files 0600), written to a temporary file and renamed, so that a
// daemon that dies halfway leaves the previous record. A record whose
// session had no request for Idle has expired; beyond Max records the
// oldest are removed, once there are Max/8 more than Max, so that a full
// folder is read once per Max/8 new records rather than for each.
//
// The folder and its files follow package statefile's rules: a record that
// is a symlink, another user's, writable by others or larger than
// maxRecordBytes is refused without being followed or read whole, removed,
// and logged on Log (nil: not logged).
type FileStore struct {
	Dir  string
	Max  int
	Idle time.Duration
	Log  *slog.Logger

	// The folder is read when the records may be Max/8 past Max (a
	// read per new record made each new session cost a read of every
	// record once the folder was full: 75 ms at 10,000), and once a
	// minute for the expired ones.
	mu      sync.Mutex
	counted bool                 // count is known
	count   int                  // records in the folder
	pruned  time.Time            // the last read of the folder
	touched map[string]time.Time // when each record's time was last set
	// refusedDir: Prune found the folder not this user's; nothing is
	// read from it.
	refusedDir bool
}

// pruneEvery is how often a new record also looks for expired ones.
const pruneEvery = time.Minute

// recordExt ends the name of every record file.
const recordExt = ".json"

// maxRecordBytes bounds a record file: it holds one initialize request (a
// client's message, 16 MiB at most by default) and a few small fields.
const maxRecordBytes = 20 << 20

// validID reports whether id can be one of rand.Text's: a session id a
// client sends is checked before it names a file.
func validID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for _, c := range id {
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

func (s *FileStore) path(id string) string { return filepath.Join(s.Dir, id+recordExt) }

// Save implements Store.
func (s *FileStore) Save(r *Record) error {
	if !validID(r.ID) {
		return fmt.Errorf("streamable: session id %q cannot name a record", r.ID)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := statefile.PrepareDir(s.Dir); err != nil {
		return err
	}
	fresh := false
	if _, err := os.Lstat(s.path(r.ID)); errors.Is(err, fs.ErrNotExist) {
		fresh = true
	}
	if err := statefile.WriteFile(s.path(r.ID), b); err != nil {
		return err
	}
	if fresh {
		s.logRefusals(s.countFresh())
	}
	return nil
}

// countFresh counts a new record, and prunes when the count is not known,
// past Max, or not pruned for a while; it returns what pruning refused.
func (s *FileStore) countFresh() []refusedRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	if !s.counted || (s.Max > 0 && s.count > s.Max+s.Max/8) || time.Since(s.pruned) > pruneEvery {
		return s.pruneLocked()
	}
	return nil
}

// refusedRecord is a record that pruning removed because statefile refused it,
// to log once the lock is released.
type refusedRecord struct {
	id  string
	err error
}

func (s *FileStore) logRefusals(rs []refusedRecord) {
	for _, r := range rs {
		s.logRefused(r.id, r.err)
	}
}

// Load implements Store.
func (s *FileStore) Load(id string) (*Record, error) {
	if !validID(id) || s.dirRefused() {
		return nil, fs.ErrNotExist
	}
	fi, err := statefile.Stat(s.path(id))
	if s.refused(id, err) {
		return nil, fmt.Errorf("session %s: refused record: %w", id, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	if s.expired(fi) {
		s.Delete(id)
		return nil, fmt.Errorf("session %s expired: %w", id, fs.ErrNotExist)
	}
	b, err := statefile.ReadFile(s.path(id), maxRecordBytes)
	if s.refused(id, err) {
		return nil, fmt.Errorf("session %s: refused record: %w", id, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	r, ok := decodeRecord(b, id)
	if !ok {
		s.Delete(id)
		return nil, fmt.Errorf("session %s: unreadable record: %w", id, fs.ErrNotExist)
	}
	return r, nil
}

// decodeRecord is the record of id that b holds; false when b is not one:
// not JSON, another session's, without an initialize message (an object:
// replay checks that it is an initialize request), or with a folder that
// is not an absolute, clean path.
func decodeRecord(b []byte, id string) (*Record, bool) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil || r.ID != id || len(r.Initialize) == 0 || r.Initialize[0] != '{' {
		return nil, false
	}
	if r.Folder != "" && (!filepath.IsAbs(r.Folder) || filepath.Clean(r.Folder) != r.Folder) {
		return nil, false
	}
	return &r, true
}

func (s *FileStore) dirRefused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusedDir
}

// refused reports whether err is statefile's refusal of the record of id;
// such a record is logged and removed (the folder is ours).
func (s *FileStore) refused(id string, err error) bool {
	if !errors.Is(err, statefile.ErrUnsafe) && !errors.Is(err, statefile.ErrTooLarge) {
		return false
	}
	s.logRefused(id, err)
	s.Delete(id)
	return true
}

// logRefused says why the record of id was refused. The two kinds have
// messages of their own: the daemon's log limits each message's rate.
func (s *FileStore) logRefused(id string, err error) {
	if s.Log == nil {
		return
	}
	msg := "removed a session record that is refused: not a private file of this user"
	if errors.Is(err, statefile.ErrTooLarge) {
		msg = "removed a session record that is refused: too large"
	}
	s.Log.Warn(msg, "session", id, "error", err)
}

func (s *FileStore) expired(fi fs.FileInfo) bool {
	return s.Idle > 0 && time.Since(fi.ModTime()) > s.Idle
}

// Touch implements Store: the file's time is the session's last request,
// within a 60th of Idle (at most a minute), so that not every request
// costs a system call.
func (s *FileStore) Touch(id string) {
	if !validID(id) {
		return
	}
	now := time.Now()
	if !s.touchDue(id, now) {
		return
	}
	os.Chtimes(s.path(id), now, now)
}

func (s *FileStore) touchDue(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	every := min(time.Minute, s.Idle/60)
	if last, ok := s.touched[id]; ok && now.Sub(last) < every {
		return false
	}
	if s.touched == nil {
		s.touched = make(map[string]time.Time)
	}
	s.touched[id] = now
	return true
}

// Delete implements Store.
func (s *FileStore) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteLocked(id)
}

func (s *FileStore) deleteLocked(id string) {
	if !validID(id) {
		return
	}
	if os.Remove(s.path(id)) == nil && s.count > 0 {
		s.count--
	}
	delete(s.touched, id)
}

// pruneLocked removes the expired records, and the oldest beyond Max, and
// counts those left; it returns the records it removed because statefile
// refused them, for the caller to log after the unlock.
func (s *FileStore) pruneLocked() (refused []refusedRecord) {
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return refused
	}
	s.pruned = time.Now()
	type rec struct {
		id  string
		mod time.Time
	}
	var live []rec
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), recordExt)
		fi, err := e.Info()
		if !ok || !validID(id) || err != nil {
			continue
		}
		if err := statefile.CheckInfo(s.path(id), fi); err != nil {
			refused = append(refused, refusedRecord{id, err})
			s.deleteLocked(id)
			continue
		}
		if s.expired(fi) {
			s.deleteLocked(id)
			continue
		}
		live = append(live, rec{id, fi.ModTime()})
	}
	s.count, s.counted = len(live), true
	if s.Max <= 0 || len(live) <= s.Max {
		return refused
	}
	slices.SortFunc(live, func(a, b rec) int { return cmp.Compare(a.mod.UnixNano(), b.mod.UnixNano()) })
	for _, r := range live[:len(live)-s.Max] {
		s.deleteLocked(r.id)
	}
	return refused
}

// Prune removes the expired records, and the oldest beyond Max: at the
// daemon's start. It first makes the folder private (statefile.PrepareDir:
// one of ours open to others is set to 0700); a folder that is refused
// (another user's, a symlink) is logged, and no record is read from it.
func (s *FileStore) Prune() {
	note, err := statefile.PrepareDir(s.Dir)
	if s.Log != nil {
		switch {
		case err != nil:
			s.Log.Warn("the HTTP session records' folder is refused: sessions are not kept or restored", "error", err)
		case note != "":
			s.Log.Warn(note)
		}
	}
	s.logRefusals(s.prune(err != nil))
}

// prune is Prune's part under the lock: refusedDir, then the records.
func (s *FileStore) prune(refusedDir bool) []refusedRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusedDir = refusedDir
	if refusedDir {
		return nil
	}
	return s.pruneLocked()
}
