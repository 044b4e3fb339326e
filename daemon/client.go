package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/socket"
)

// Client is the other side of the control endpoint: what the commands
// that talk to a running daemon (status, logs, reload, restart, doctor,
// connect) ask it. Its errors say in plain words when no daemon answers.
type Client struct {
	path string // the control socket
	hc   *http.Client
}

// NewClient is a client of the daemon serving in the socket folder dir.
// Nothing is dialled until a request is made.
func NewClient(dir string) *Client {
	path := filepath.Join(dir, ControlSocket)
	return &Client{path: path, hc: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			// socket.Dial checks the folder and the listener's uid before
			// a byte is sent: another user's daemon is refused.
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return socket.Dial(ctx, path)
			},
		},
	}}
}

// Status is GET /status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodGet, "/status", &st)
	return st, err
}

// Reload is POST /reload: the daemon loads its config again.
func (c *Client) Reload(ctx context.Context) (ReloadResult, error) {
	var res ReloadResult
	err := c.call(ctx, http.MethodPost, "/reload", &res)
	return res, err
}

// Restart is POST /servers/NAME/restart.
func (c *Client) Restart(ctx context.Context, name string) error {
	var reply map[string]string
	return c.call(ctx, http.MethodPost, "/servers/"+name+"/restart", &reply)
}

// Logs is GET /servers/NAME/logs: the server's recent log lines, and with
// follow each new one until ctx ends or the daemon goes. The caller closes
// the body.
func (c *Client) Logs(ctx context.Context, name string, follow bool) (io.ReadCloser, error) {
	u := "/servers/" + name + "/logs"
	if follow {
		u += "?follow=1"
	}
	hc := *c.hc
	hc.Timeout = 0 // following has no end
	resp, err := c.do(ctx, &hc, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, daemonError(resp.Status, body)
	}
	return resp.Body, nil
}

// TapQuery is what `mcpmux tap` asks for: the servers named (all when
// none), one session (all when 0), whole messages with Full, printed as
// the daemon's JSON lines with JSON.
type TapQuery struct {
	Servers []string
	Session uint64
	Full    bool
	JSON    bool
}

// String says what q taps, for the line `mcpmux tap` starts with.
func (q TapQuery) String() string {
	what := "every server"
	if len(q.Servers) > 0 {
		what = strings.Join(q.Servers, ", ")
	}
	if q.Session != 0 {
		what += fmt.Sprintf(", session %d only", q.Session)
	}
	if q.Full {
		return what + ", whole messages"
	}
	return what + ", redacted (--full shows whole messages)"
}

// Tap attaches a tap for the messages q asks for through GET /tap; once
// it returns, the daemon queues them, and PrintTap prints them.
func (c *Client) Tap(ctx context.Context, q TapQuery) (io.ReadCloser, error) {
	v := url.Values{}
	if len(q.Servers) > 0 {
		v.Set("servers", strings.Join(q.Servers, ","))
	}
	if q.Session != 0 {
		v.Set("session", strconv.FormatUint(q.Session, 10))
	}
	if q.Full {
		v.Set("full", "1")
	}
	hc := *c.hc
	hc.Timeout = 0 // following has no end
	resp, err := c.do(ctx, &hc, http.MethodGet, "/tap?"+v.Encode())
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, daemonError(resp.Status, body)
	}
	return resp.Body, nil
}

// ErrTapEnded: the daemon ended a tap's stream, as it does when it stops.
var ErrTapEnded = errors.New("the daemon ended the tap (it stopped or restarted)")

// PrintTap copies the daemon's tap lines from r to w as they come, as they
// are (asJSON) or as text (mux.TapEvent.String), until r ends
// (ErrTapEnded) or fails.
func PrintTap(w io.Writer, r io.Reader, asJSON bool) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && asJSON {
			w.Write(line)
		} else if len(line) > 0 {
			var ev mux.TapEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				return fmt.Errorf("the daemon sent a tap line that is not JSON: %w", err)
			}
			fmt.Fprintln(w, ev.String())
		}
		if errors.Is(err, io.EOF) {
			return ErrTapEnded
		}
		if err != nil {
			return err
		}
	}
}

// call sends one request and decodes the daemon's JSON answer into out.
func (c *Client) call(ctx context.Context, method, urlPath string, out any) error {
	resp, err := c.do(ctx, c.hc, method, urlPath)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("read the daemon's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return daemonError(resp.Status, body)
	}
	return json.Unmarshal(body, out)
}

func (c *Client) do(ctx context.Context, hc *http.Client, method, urlPath string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://mcpmux"+urlPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, noDaemon(c.path, err)
	}
	return resp, nil
}

// daemonError is the error of a refused control request: the daemon's own
// words when it gave them.
func daemonError(status string, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return fmt.Errorf("the daemon answered %s", status)
}

// noDaemon is the error of a control request that reached no daemon on
// path: a refused folder or listener as such, else that no daemon answers,
// once and in plain words, without the layers of wrapping the HTTP client
// and the dial put around the cause ("Get ...: dial X: socket dir Y: lstat
// Y: ...").
func noDaemon(path string, err error) error {
	if r := socket.Refusal(err); r != nil {
		return r
	}
	return fmt.Errorf("no mcpmux daemon answers on %s (%w): start one with `mcpmux serve`", path, plainDialError(err))
}

// plainDialError is the cause of a failed dial, as the OS says it: "no
// such file or directory" (no socket, or no folder: nothing has served
// there), "connection refused" (a socket left by a daemon that died).
func plainDialError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return syscall.ENOENT
	}
	return socket.Cause(err)
}
