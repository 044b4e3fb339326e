//go:build unix

package socket_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

func TestPrepareDirCreatesPrivateDirAndParents(t *testing.T) {
	dir := filepath.Join(testutil.ShortDir(t), "a", "b")
	require.NoError(t, socket.PrepareDir(dir))

	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Lstat(d)
		require.NoError(t, err)
		assert.Equal(t, fs.ModeDir|0o700, fi.Mode(), "mode of %s", d)
	}
}

func TestPrepareDirIgnoresPermissiveUmask(t *testing.T) {
	old := setUmask(0)
	defer setUmask(old)
	dir := filepath.Join(testutil.ShortDir(t), "d")
	require.NoError(t, socket.PrepareDir(dir))
	fi, err := os.Lstat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDir|0o700, fi.Mode())
}

func TestPrepareDirAcceptsExistingPrivateDir(t *testing.T) {
	dir := filepath.Join(testutil.ShortDir(t), "d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o600))

	require.NoError(t, socket.PrepareDir(dir))
	require.NoError(t, socket.PrepareDir(dir), "second call")

	got, err := os.ReadFile(filepath.Join(dir, "keep"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(got), "contents left alone")
}

func TestPrepareDirRefusesUnsafeDir(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T, path string)
		inErr  []string // fragments the error must contain besides the path
		wantFi fs.FileMode
	}{
		{
			name: "group and other bits",
			make: func(t *testing.T, p string) {
				require.NoError(t, os.Mkdir(p, 0o700))
				require.NoError(t, os.Chmod(p, 0o755))
			},
			inErr:  []string{"0755", fmt.Sprintf("uid %d", os.Getuid())},
			wantFi: fs.ModeDir | 0o755,
		},
		{
			name: "other bits only",
			make: func(t *testing.T, p string) {
				require.NoError(t, os.Mkdir(p, 0o700))
				require.NoError(t, os.Chmod(p, 0o701))
			},
			inErr:  []string{"0701"},
			wantFi: fs.ModeDir | 0o701,
		},
		{
			name: "symlink to a private dir",
			make: func(t *testing.T, p string) {
				target := p + "-target"
				require.NoError(t, os.Mkdir(target, 0o700))
				require.NoError(t, os.Symlink(target, p))
			},
			inErr:  []string{"symlink"},
			wantFi: fs.ModeSymlink, // permission bits of a link vary by system
		},
		{
			name:   "regular file",
			make:   func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, nil, 0o600)) },
			inErr:  []string{"not a directory"},
			wantFi: 0o600,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(testutil.ShortDir(t), "d")
			tt.make(t, path)

			err := socket.PrepareDir(path)
			require.Error(t, err)
			for _, frag := range append([]string{path}, tt.inErr...) {
				assert.Contains(t, err.Error(), frag)
			}
			assert.ErrorIs(t, err, socket.ErrUnsafeDir)
			checkErr := socket.CheckDir(path)
			require.Error(t, checkErr, "CheckDir refuses what PrepareDir refuses")
			assert.Equal(t, err.Error(), checkErr.Error(), "CheckDir says what PrepareDir says")
			assert.ErrorIs(t, checkErr, socket.ErrUnsafeDir)
			fi, err := os.Lstat(path)
			require.NoError(t, err)
			got := fi.Mode()
			if got.Type() == fs.ModeSymlink {
				got = fs.ModeSymlink
			}
			assert.Equal(t, tt.wantFi, got, "mode unchanged")
		})
	}
}

func TestPrepareDirRefusesDirOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a folder to another uid")
	}
	dir := filepath.Join(testutil.ShortDir(t), "d")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chown(dir, 65534, 65534))

	err := socket.PrepareDir(dir)
	require.Error(t, err)
	for _, frag := range []string{dir, "0700", "owned by uid 65534"} {
		assert.Contains(t, err.Error(), frag)
	}
	assert.ErrorIs(t, err, socket.ErrUnsafeDir)
}

func TestCheckDirAcceptsPrivateDirAndCreatesNothing(t *testing.T) {
	dir := filepath.Join(testutil.ShortDir(t), "d")
	missing := filepath.Join(dir, "below")

	err := socket.CheckDir(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a missing folder")
	assert.NotErrorIs(t, err, socket.ErrUnsafeDir, "missing is not unsafe")
	_, err = os.Lstat(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "CheckDir created nothing")

	require.NoError(t, socket.PrepareDir(dir))
	assert.NoError(t, socket.CheckDir(dir), "a folder PrepareDir made")
	assert.ErrorIs(t, socket.CheckDir(missing), fs.ErrNotExist, "missing inside a private folder")
}
