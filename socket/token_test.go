package socket_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/statefile"
	"github.com/mcpmux/mcpmux/socket"
)

// TestTokenRefused: a token file that is a link or another user's is no
// token to serve with (statefile.ErrUnsafe), and a token folder of ours
// open to others is made private first.
func TestTokenRefused(t *testing.T) {
	const theirs = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "their.token")
			require.NoError(t, os.WriteFile(target, []byte(theirs+"\n"), 0o600))
			require.NoError(t, os.Symlink(target, path))
		}, "is a symlink"},
		{"another uid's, mode 0600", func(t *testing.T, path string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give a token file to another uid (65534); run the tests as root to cover it")
			}
			require.NoError(t, os.WriteFile(path, []byte(theirs+"\n"), 0o600))
			require.NoError(t, os.Chown(path, 65534, 65534))
		}, "owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mcpmux")
			require.NoError(t, os.Mkdir(dir, 0o700))
			require.NoError(t, os.Chmod(dir, 0o777))
			path := filepath.Join(dir, "http.token")
			tt.make(t, path)
			tok, _, err := socket.LoadOrCreateToken(path)
			assert.ErrorIs(t, err, statefile.ErrUnsafe)
			assert.ErrorContains(t, err, tt.want)
			assert.Empty(t, tok, "their token is not taken")
			fi, err := os.Stat(dir)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the folder is made private")
		})
	}
}
