package jsonrpc_test

import (
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// TestReaderChecksLargeFrames: a frame over 64 KiB is checked as it is
// read by a Reader told to (a server's), however the reads cut it; ParseChecked then gives what Parse gives.
// An invalid large frame is not Checked, and Parse refuses it as before; a
// small frame is left to Parse.
func TestReaderChecksLargeFrames(t *testing.T) {
	good := string(callResult(1 << 20))
	badUTF8 := good[:len(good)-10] + "\xff" + good[len(good)-9:]
	truncated := good[:len(good)-2]
	small := string(callResult(100))
	tests := []struct {
		name, frame string
		checked     bool
	}{
		{"valid 1 MB", good, true},
		{"bad UTF-8 near the end", badUTF8, false},
		{"cut short", truncated, false},
		{"small", small, false},
	}
	for _, tt := range tests {
		for _, size := range []int{512, 256 << 10} {
			plain := jsonrpc.NewReaderSize(strings.NewReader(tt.frame+"\n"), 16<<20, size)
			frame, err := plain.Read()
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.frame, string(frame), "%s: the frame as sent, read by a Reader that does not check", tt.name)
			assert.False(t, plain.Checked(), "%s: a Reader that does not check", tt.name)

			r := jsonrpc.NewReaderSize(iotest.HalfReader(strings.NewReader(tt.frame+"\r\n"+small+"\n")), 16<<20, size)
			r.CheckLargeFrames()
			frame, err = r.Read()
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.frame, string(frame), "%s: the frame as sent", tt.name)
			assert.Equal(t, tt.checked, r.Checked(), "%s, buffer %d: Checked", tt.name, size)
			want, wantErr := jsonrpc.Parse(frame)
			if r.Checked() {
				got, err := jsonrpc.ParseChecked(frame)
				assert.Equal(t, wantErr, err, tt.name)
				assert.Equal(t, want, got, tt.name)
			} else if tt.name != "small" {
				assert.Error(t, wantErr, "%s: Parse refuses it", tt.name)
			}
			next, err := r.Read()
			require.NoError(t, err, tt.name)
			assert.Equal(t, small, string(next), "%s: the next frame", tt.name)
			assert.False(t, r.Checked(), "%s: the small frame after", tt.name)
		}
	}
}

// BenchmarkReadParse10MB reads and parses a 10 MB answer as a server's
// stdout reader does: "parse" checks the frame after reading it, as before
// the Reader checked large frames; "checked" trusts the Reader's check.
func BenchmarkReadParse10MB(b *testing.B) {
	line := append(callResult(10<<20), '\n')
	for _, trust := range []bool{false, true} {
		b.Run(map[bool]string{false: "parse", true: "checked"}[trust], func(b *testing.B) {
			r := jsonrpc.NewReaderSize(&loopReader{buf: line}, 16<<20, 256<<10)
			r.CheckLargeFrames()
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				f, err := r.Read()
				if err != nil || !r.Checked() {
					b.Fatalf("read %d bytes: %v, checked %v", len(f), err, r.Checked())
				}
				if trust {
					_, err = jsonrpc.ParseChecked(f)
				} else {
					_, err = jsonrpc.Parse(f)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReaderRecycledFrames: large frames read one after another, each
// recycled once used, come out byte-exact, whichever buffer they land in:
// a smaller one after a larger, a larger one that must outgrow a recycled
// buffer, and frames that leave their buffer through ReplaceID's shift.
func TestReaderRecycledFrames(t *testing.T) {
	var frames []string
	for i, n := range []int{2 << 20, 100 << 10, 3 << 20, 70 << 10, 3 << 20} {
		frames = append(frames, strings.Replace(string(callResult(n)), `"id":41`, `"id":`+strings.Repeat("7", i+1), 1))
	}
	in := strings.Join(frames, "\n") + "\n"
	for _, size := range []int{512, 256 << 10} {
		r := jsonrpc.NewReaderSize(iotest.HalfReader(strings.NewReader(in)), 16<<20, size)
		r.CheckLargeFrames()
		for i, want := range frames {
			frame, err := r.Read()
			require.NoError(t, err, "frame %d", i)
			require.Equal(t, want, string(frame), "frame %d, buffer %d", i, size)
			require.True(t, r.Checked(), "frame %d", i)
			m, err := jsonrpc.ParseChecked(frame)
			require.NoError(t, err, "frame %d", i)
			out := m.ReplaceID([]byte(`"a"`))
			assert.Equal(t, strings.Replace(want, `"id":`+strings.Repeat("7", i+1), `"id":"a"`, 1), string(out), "frame %d rewritten", i)
			jsonrpc.Recycle(frame)
		}
	}
}
