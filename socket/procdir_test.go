package socket_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/socket"
)

func TestProcessDirIsTheWorkingFolder(t *testing.T) {
	want, err := os.Getwd()
	require.NoError(t, err)
	got, err := socket.ProcessDir(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = socket.ProcessDir(0)
	assert.Error(t, err)
}
