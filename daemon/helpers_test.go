package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/internal/testutil"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/upstream"
)

const within = 10 * time.Second

// fake is a server whose process is this test binary as
// testutil.FakeServer; tag is what it answers whoami with.
func fake(t *testing.T, name, tag string) daemon.Server {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return daemon.Server{Hub: mux.Config{
		Name: name,
		Upstream: upstream.Config{
			Command: exe,
			Env:     map[string]string{testutil.FakeServerEnv: "serve", testutil.FakeTagEnv: tag},
			Stderr:  upstream.StderrDiscard,
		},
		RestartBackoff: time.Millisecond,
	}}
}

// running is a daemon started by start, and the end of its Run.
type running struct {
	d    *daemon.Daemon
	dir  string
	stop context.CancelFunc
	done chan error // Run's result
	log  *testutil.Buffer
}

// start runs a daemon for cfg in a new short folder (cfg.SocketDir, when
// empty) until the test ends, and waits until its control socket answers.
func start(t *testing.T, cfg daemon.Config) *running {
	t.Helper()
	if cfg.SocketDir == "" {
		cfg.SocketDir = filepath.Join(testutil.ShortDir(t), "s")
	}
	r := &running{dir: cfg.SocketDir, done: make(chan error, 1), log: new(testutil.Buffer)}
	if cfg.Logger == nil {
		cfg.Logger = slogTo(r.log)
	}
	d, err := daemon.New(cfg)
	require.NoError(t, err)
	r.d = d
	ctx, stop := context.WithCancel(t.Context())
	r.stop = stop
	go func() { r.done <- d.Run(ctx) }() // waited for by the cleanup below
	t.Cleanup(func() {
		stop()
		select {
		case <-r.done:
		case <-time.After(within):
			t.Errorf("Run still running %v after its context ended", within)
		}
	})
	testutil.Eventually(t, within, "the control socket answers", func() (bool, error) {
		select {
		case err := <-r.done:
			r.done <- err
			return false, fmt.Errorf("Run returned: %v", err)
		default:
		}
		_, _, err := r.control(http.MethodGet, "/status")
		return err == nil, err
	})
	return r
}

// do sends one request to the control socket; the caller closes the body.
func (r *running) do(method, path string) (*http.Response, error) {
	c := http.Client{Timeout: within, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(r.dir, daemon.ControlSocket))
		},
	}}
	req, err := http.NewRequest(method, "http://mcpmux"+path, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

func (r *running) get(path string) (*http.Response, error) { return r.do(http.MethodGet, path) }

// control sends one request to the control socket and reads the answer.
func (r *running) control(method, path string) (int, []byte, error) {
	resp, err := r.do(method, path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// status is GET /status, decoded.
func (r *running) status(t *testing.T) daemon.Status {
	t.Helper()
	code, body, err := r.control(http.MethodGet, "/status")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "GET /status: %s", body)
	var st daemon.Status
	require.NoError(t, json.Unmarshal(body, &st), "GET /status: %s", body)
	return st
}

func (r *running) socket(name string) string { return filepath.Join(r.dir, name+".sock") }

// client is one initialized session on a server's socket.
type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, path string) *client {
	t.Helper()
	conn, err := net.Dial("unix", path)
	require.NoError(t, err, "dial %s", path)
	t.Cleanup(func() { conn.Close() })
	c := &client{t: t, conn: conn, r: bufio.NewReader(conn)}
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	_, err = c.await(`"init"`)
	require.NoError(t, err, "initialize on %s", path)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *client) send(line string) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(within))
	_, err := io.WriteString(c.conn, line+"\n")
	require.NoError(c.t, err)
}

// request sends a request with a numeric or string id (as JSON).
func (c *client) request(id, method string) {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q}`, id, method))
}

// await reads until the answer to id and returns its result; an error
// answer or a closed connection is an error.
func (c *client) await(id string) (json.RawMessage, error) {
	c.conn.SetReadDeadline(time.Now().Add(within))
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("%w: %s", err, line)
		}
		if string(m.ID) != id {
			continue // a notification, or another answer
		}
		if m.Error != nil {
			return nil, fmt.Errorf("error answer: %s", m.Error)
		}
		return m.Result, nil
	}
}

// whoami asks the server for its pid and tag.
func (c *client) whoami(id string) (pid int, tag string, err error) {
	c.request(id, "whoami")
	res, err := c.await(id)
	if err != nil {
		return 0, "", err
	}
	var w struct {
		Pid int    `json:"pid"`
		Tag string `json:"tag"`
	}
	err = json.Unmarshal(res, &w)
	return w.Pid, w.Tag, err
}

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// alive reports whether a process with pid exists.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}
