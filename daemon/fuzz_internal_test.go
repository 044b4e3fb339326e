package daemon

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
)

// FuzzDecodeRecord feeds a daemon record's decode any file contents: a
// record it accepts names a pid the kernel takes as that process alone and
// an absolute socket folder, and reads back the same once written.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		`{"config":"/c/mcpmux.toml","socket_dir":"/run/user/1000/mcpmux","pid":4242,"version":"v1","started":"2026-12-04T15:00:00Z"}`,
		`{"config":"/c","socket_dir":"/s","pid":1,"started":"2026-12-04T15:00:00.123456789+02:00","autostarted":true}`,
		`{"socket_dir":"/s","pid":4294967295}`,
		`{"socket_dir":"/s","pid":4294967297}`,
		`{"socket_dir":"rel","pid":7}`,
		`{"socket_dir":"/s","pid":-1}`,
		`{"socket_dir":"/s","pid":7.5}`,
		`{"socket_dir":"/s","pid":7,"started":"not a time"}`,
		`[]`, `null`, ``, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			if r != (Record{}) {
				t.Fatalf("a refused record with a value: %+v", r)
			}
			return
		}
		if r.Pid <= 0 || r.Pid > math.MaxInt32 {
			t.Fatalf("accepted pid %d, which kill(2) would not take as one process", r.Pid)
		}
		if !filepath.IsAbs(r.SocketDir) {
			t.Fatalf("accepted a relative socket folder %q", r.SocketDir)
		}
		saved, err := json.Marshal(r)
		if err != nil {
			return // a time json cannot write (a year past 9999 after its offset): WriteRecord refuses it
		}
		again, err := decodeRecord(saved)
		if err != nil {
			t.Fatalf("a written record does not read: %s: %v", saved, err)
		}
		if !again.Started.Equal(r.Started) {
			t.Fatalf("started changed: %v, then %v", r.Started, again.Started)
		}
		again.Started = r.Started
		if again != r {
			t.Fatalf("a record changes when written:\n%+v\n%+v", r, again)
		}
	})
}
