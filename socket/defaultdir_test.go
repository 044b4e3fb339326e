//go:build unix

package socket_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// roots stand for /run/user, /tmp and the user's home folder in one test.
type roots struct {
	runUser, tmp, home string
}

func newRoots(t *testing.T) roots {
	t.Helper()
	base := testutil.ShortDir(t)
	require.NoError(t, os.Chmod(base, 0o711)) // nobody must reach tmp
	r := roots{
		runUser: filepath.Join(base, "run", "user"),
		tmp:     filepath.Join(base, "tmp"),
		home:    filepath.Join(base, "home"),
	}
	require.NoError(t, os.MkdirAll(r.runUser, 0o755))
	require.NoError(t, os.Mkdir(r.tmp, 0o700))
	require.NoError(t, os.Chmod(r.tmp, 0o777|fs.ModeSticky))
	require.NoError(t, os.Mkdir(r.home, 0o700))
	return r
}

func (r roots) runtimeDir() string { return filepath.Join(r.runUser, strconv.Itoa(os.Getuid())) }
func (r roots) shared() string     { return filepath.Join(r.tmp, fmt.Sprintf("mcpmux-%d", os.Getuid())) }
func (r roots) fallback() string   { return filepath.Join(r.home, ".mcpmux", "run") }
func (r roots) homeDir() string    { return r.home }

func TestDefaultDirDependsOnTheUIDAndTheMachineOnly(t *testing.T) {
	uid := os.Getuid()
	ours := fmt.Sprintf("uid %d", uid)
	var exe string // the squatter's binary, copied once when root
	if uid == 0 {
		exe = squatterExe(t)
	}
	mkdir := func(perm fs.FileMode) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			require.NoError(t, os.Mkdir(p, 0o700))
			require.NoError(t, os.Chmod(p, perm))
		}
	}
	symlinkToOurs := func(t *testing.T, p string) {
		require.NoError(t, os.Mkdir(p+".real", 0o700))
		require.NoError(t, os.Symlink(p+".real", p))
	}
	theirs := func(mode string) func(*testing.T, string) {
		return func(t *testing.T, p string) { startSquatter(t, exe, mode, p) }
	}
	tests := []struct {
		name       string
		runtimeDir func(*testing.T, string) // makes /run/user/UID; nil: absent
		shared     func(*testing.T, string) // makes /tmp/mcpmux-UID; nil: absent
		want       string                   // "run", "tmp" or "home"
		note       string                   // after the /tmp path; "" for none
	}{
		{name: "no runtime folder (macOS), /tmp name free", want: "tmp"},
		{name: "runtime folder ours", runtimeDir: mkdir(0o700), want: "run"},
		{name: "runtime folder ours, readable by others", runtimeDir: mkdir(0o755), want: "run"},
		{name: "runtime folder writable by others", runtimeDir: mkdir(0o777), want: "tmp"},
		{name: "runtime folder of another uid", runtimeDir: chownedTo(nobody), want: "tmp"},
		{name: "runtime path a symlink to ours", runtimeDir: symlinkToOurs, want: "tmp"},
		{name: "runtime path a file", runtimeDir: writeFile, want: "tmp"},
		{name: "/tmp folder ours and private", shared: mkdir(0o700), want: "tmp"},
		{name: "/tmp folder ours but open", shared: mkdir(0o755), want: "home",
			note: " is not a private mcpmux folder (a folder owned by " + ours + ", mode 0755)"},
		{name: "/tmp name our symlink", shared: symlinkToOurs, want: "home",
			note: " is not a private mcpmux folder (a symlink owned by " + ours + ")"},
		{name: "/tmp folder squatted, private to them", shared: theirs("dir700"), want: "home",
			note: " is not ours (a folder owned by uid 65534, mode 0700)"},
		{name: "/tmp folder squatted, open", shared: theirs("dir777"), want: "home",
			note: " is not ours (a folder owned by uid 65534, mode 0777)"},
		{name: "/tmp name squatted by a symlink", shared: theirs("symlink"), want: "home",
			note: " is not ours (a symlink owned by uid 65534)"},
		{name: "/tmp name squatted by a file", shared: theirs("file"), want: "home",
			note: " is not ours (a file owned by uid 65534)"},
		{name: "runtime folder ours wins over a squatted /tmp", runtimeDir: mkdir(0o700), shared: theirs("dir777"), want: "run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRoots(t)
			if tt.runtimeDir != nil {
				tt.runtimeDir(t, r.runtimeDir())
			}
			if tt.shared != nil {
				tt.shared(t, r.shared())
			}
			want := map[string]string{
				"run":  filepath.Join(r.runtimeDir(), "mcpmux"),
				"tmp":  r.shared(),
				"home": r.fallback(),
			}[tt.want]
			wantNote := ""
			if tt.note != "" {
				wantNote = r.shared() + tt.note + "; mcpmux serves in " + r.fallback() + " instead"
			}

			asked := 0
			dir, note, err := socket.DefaultDirIn(r.runUser, r.tmp, uid, func() string { asked++; return r.home })
			require.NoError(t, err)
			assert.Equal(t, want, dir, "the folder")
			assert.Equal(t, wantNote, note, "the note")
			assert.Equal(t, map[bool]int{true: 1, false: 0}[tt.want == "home"], asked, "home asked only for the fallback")

			// The daemon prepares the folder; clients computing it later
			// must still find the same one, and it must pass their check.
			require.NoError(t, socket.PrepareDir(dir), "the daemon's PrepareDir")
			assert.NoError(t, socket.CheckDir(dir), "the client's CheckDir")
			again, againNote, err := socket.DefaultDirIn(r.runUser, r.tmp, uid, r.homeDir)
			require.NoError(t, err)
			assert.Equal(t, []string{dir, note}, []string{again, againNote}, "the answer once the daemon made its folder")
		})
	}
}

func TestDefaultDirFallbackIsPrivateWithItsParents(t *testing.T) {
	r := newRoots(t)
	require.NoError(t, os.Mkdir(r.shared(), 0o700))
	require.NoError(t, os.Chmod(r.shared(), 0o755))

	dir, _, err := socket.DefaultDirIn(r.runUser, r.tmp, os.Getuid(), r.homeDir)
	require.NoError(t, err)
	require.Equal(t, r.fallback(), dir)
	_, err = os.Lstat(filepath.Dir(dir))
	assert.ErrorIs(t, err, fs.ErrNotExist, "DefaultDir created nothing")

	require.NoError(t, socket.PrepareDir(dir))
	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Lstat(d)
		require.NoError(t, err)
		assert.Equal(t, fs.ModeDir|0o700, fi.Mode(), "mode of %s", d)
	}
}

func TestDefaultDirWithoutHomeRefusesASquattedTmp(t *testing.T) {
	for _, home := range []string{"", "relative/home"} {
		t.Run(fmt.Sprintf("home %q", home), func(t *testing.T) {
			r := newRoots(t)
			require.NoError(t, os.WriteFile(r.shared(), nil, 0o644))

			dir, note, err := socket.DefaultDirIn(r.runUser, r.tmp, os.Getuid(), func() string { return home })
			assert.ErrorIs(t, err, socket.ErrUnsafeDir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), r.shared())
			assert.Equal(t, []string{"", ""}, []string{dir, note})
		})
	}
}

func TestDefaultDirLooksAtTheRealRoots(t *testing.T) {
	home := testutil.ShortDir(t)
	dir, note, err := socket.DefaultDir(os.Getuid(), func() string { return home })
	wantDir, wantNote, wantErr := socket.DefaultDirIn("/run/user", "/tmp", os.Getuid(), func() string { return home })
	assert.Equal(t, []any{wantDir, wantNote, wantErr}, []any{dir, note, err})
}

// chownedTo returns a maker of a 0700 folder owned by uid, which needs root.
func chownedTo(uid int) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		if os.Getuid() != 0 {
			t.Skip("needs root to give a folder to another uid")
		}
		require.NoError(t, os.Mkdir(p, 0o700))
		require.NoError(t, os.Chown(p, uid, uid))
	}
}

func writeFile(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, nil, 0o644)) }
