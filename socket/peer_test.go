//go:build unix

package socket_test

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/socket"
)

func TestPeerOfReportsOurProcess(t *testing.T) {
	path := filepath.Join(preparedDir(t), "p.sock")
	l, err := socket.ListenUnix(path)
	require.NoError(t, err)
	defer l.Close()

	client, err := net.Dial("unix", path)
	require.NoError(t, err)
	defer client.Close()
	server, err := l.Accept()
	require.NoError(t, err)
	defer server.Close()

	for name, c := range map[string]net.Conn{"server side": server, "client side": client} {
		got, err := socket.PeerOf(c)
		require.NoError(t, err, name)
		want := socket.Peer{UID: os.Getuid(), PID: os.Getpid()}
		if runtime.GOOS != "linux" && got.PID == 0 {
			want.PID = 0 // the pid is optional where the system may not report it
		}
		assert.Equal(t, want, got, name)
	}
}

func TestPeerOfRefusesOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	got, err := socket.PeerOf(a)
	assert.Error(t, err)
	assert.Equal(t, socket.Peer{}, got)
}
