//go:build unix

package socket_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/socket"
)

// TestDialErrorsInPlainWords: a refused folder is found under Dial's
// wrapping, and a missing socket is the OS's own "no such file".
func TestDialErrorsInPlainWords(t *testing.T) {
	dir := testutil.ShortDir(t)
	open := filepath.Join(dir, "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	_, err := socket.Dial(t.Context(), filepath.Join(open, "a.sock"))
	r := socket.Refusal(err)
	require.Error(t, r)
	assert.ErrorIs(t, r, socket.ErrUnsafeDir)
	assert.True(t, strings.HasPrefix(r.Error(), "socket dir "+open+" has mode 0755"), "the refusal alone: %v", r)

	_, err = socket.Dial(t.Context(), filepath.Join(dir, "none.sock"))
	assert.NoError(t, socket.Refusal(err), "no socket is no refusal")
	assert.Equal(t, syscall.ENOENT, socket.Cause(err))

	plain := errors.New("plain")
	assert.Equal(t, plain, socket.Cause(plain))
	assert.NoError(t, socket.Refusal(nil))
}
