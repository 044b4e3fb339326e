package bridge

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/mux"
)

// runConfig is a Config whose daemon is always t, with the client's side
// on stdin, stdout and stderr.
func runConfig(t *Target, stdin io.Reader, stdout, stderr io.Writer) Config {
	return Config{
		Server: "demo",
		Find:   func(context.Context, io.Writer) (*Target, error) { return t, nil },
		Status: func(context.Context, string) (daemon.Status, error) {
			return daemon.Status{}, io.ErrUnexpectedEOF // no daemon holds the folder in these tests
		},
		StateDir:   func() (string, error) { return "", io.ErrUnexpectedEOF },
		SameConfig: func(a, b string) bool { return a == b },
		Drain:      bridgeWithin,
		Stdin:      stdin,
		Stdout:     stdout,
		Stderr:     stderr,
	}
}

// TestRunForwards: Run finds the daemon, opens a session on the server's
// socket in its folder, passes the client's lines through and the answers
// back, and returns nil once stdin has ended and the answer due is in.
func TestRunForwards(t *testing.T) {
	f := newFakeDaemon(t)
	tgt := &Target{Path: "/c/mux.toml", Dir: filepath.Dir(f.path), Loaded: true, Servers: []string{"demo"}}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr testutil.Buffer
	done := make(chan error, 1)
	go func() { // waited for below
		done <- Run(t.Context(), runConfig(tgt, inR, outW, &stderr))
		outW.Close()
	}()
	c := f.accept()
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	_, err := io.WriteString(inW, ping+"\n")
	require.NoError(t, err)
	assert.Equal(t, ping, c.read())
	require.NoError(t, inW.Close())
	c.answer(ping, `{}`)
	got, err := io.ReadAll(bufio.NewReader(outR))
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n", string(got), "the client's stdout")
	assert.NoError(t, <-done)
	assert.Empty(t, stderr.String())
}

// TestRunRefusesBeforeDialing: a server the config file does not have, and
// a daemon that does not answer while auto-start is off, end Run with a
// message that says what to do, before anything is read from stdin.
func TestRunRefusesBeforeDialing(t *testing.T) {
	dir := testutil.ShortDir(t)
	tests := []struct {
		name        string
		target      Target
		noAutostart bool
		want        string
	}{
		{"unknown server", Target{Path: "/c/mux.toml", Dir: dir, Loaded: true, Servers: []string{"a", "b"}},
			false, `no server named "demo" in /c/mux.toml; it configures: a, b`},
		{"no server", Target{Path: "/c/mux.toml", Dir: dir, Loaded: true},
			false, `no server named "demo": /c/mux.toml configures no server`},
		{"--no-autostart", Target{Path: "/c/mux.toml", Dir: dir, Loaded: true, Servers: []string{"demo"}, Autostart: true},
			true, "no mcpmux daemon is serving " + dir + "/demo.sock, and auto-start is off (--no-autostart was given): start one with `mcpmux serve --config /c/mux.toml`, or as a service (`mcpmux service install`)"},
		{"autostart = false", Target{Path: "/c/mux.toml", Dir: dir, Loaded: true, Servers: []string{"demo"}},
			false, "no mcpmux daemon is serving " + dir + "/demo.sock, and auto-start is off (autostart = false in [daemon]): start one with `mcpmux serve --config /c/mux.toml`, or as a service (`mcpmux service install`)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			cfg := runConfig(&tt.target, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"), &stdout, &stderr)
			cfg.NoAutostart = tt.noAutostart
			assert.EqualError(t, Run(t.Context(), cfg), tt.want)
			assert.Empty(t, stdout.String()+stderr.String(), "nothing written")
		})
	}
}

// TestRunNotServed: a daemon that holds the socket folder but does not
// serve the server is not replaced by another: Run says what it serves,
// and what to do (reload, when the file has the server; another config,
// when the daemon runs one).
func TestRunNotServed(t *testing.T) {
	dir := testutil.ShortDir(t)
	l, err := net.Listen("unix", filepath.Join(dir, daemon.ControlSocket))
	require.NoError(t, err)
	defer l.Close()
	tests := []struct {
		name    string
		running string // the config file the daemon runs
		want    string
	}{
		{"a server added, not reloaded", "/c/mux.toml",
			"the mcpmux daemon on " + dir + " (pid 42) does not serve demo; it serves idle; demo is in /c/mux.toml: run `mcpmux reload` to serve it"},
		{"another config", "/other/mux.toml",
			"the mcpmux daemon on " + dir + " (pid 42) does not serve demo; it serves idle (it runs /other/mux.toml, not /c/mux.toml)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			tgt := &Target{Path: "/c/mux.toml", Dir: dir, Loaded: true, Servers: []string{"idle", "demo"}, Autostart: true}
			cfg := runConfig(tgt, strings.NewReader(""), &stdout, &stderr)
			cfg.Status = func(_ context.Context, d string) (daemon.Status, error) {
				assert.Equal(t, dir, d, "the daemon asked is the one holding the folder")
				return daemon.Status{Pid: 42, Config: tt.running, Servers: []mux.Status{{Name: "idle"}}}, nil
			}
			assert.EqualError(t, Run(t.Context(), cfg), tt.want)
			assert.Empty(t, stdout.String()+stderr.String(), "nothing written")
		})
	}
}
