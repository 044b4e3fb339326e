package benchkit

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyTimeout bounds every wait for something we started to be ready.
const readyTimeout = 30 * time.Second

// poll calls ready every 10 ms until it reports true, ctx ends, exited
// is closed or readyTimeout passes.
func poll(ctx context.Context, what string, exited <-chan struct{}, ready func() (bool, error)) error {
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := ready()
		if ok || err != nil {
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it was ready", what)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-deadline.C:
			return fmt.Errorf("%s not ready in %v", what, readyTimeout)
		case <-tick.C:
		}
	}
}

// serverConf is one [servers.NAME] table of a daemon's config.
type serverConf struct {
	name     string
	argv     []string
	protocol string // its protocol key; "": the default (auto)
}

// daemon is a running `mcpmux serve`.
type daemon struct {
	cmd     *exec.Cmd
	config  string
	sockets string // socket_dir
	wsBase  string // ws://127.0.0.1:PORT/servers/
	log     *syncBuffer
	exited  chan struct{}
	waitErr error
}

func (d *daemon) pid() int                  { return d.cmd.Process.Pid }
func (d *daemon) socket(name string) string { return filepath.Join(d.sockets, name+".sock") }
func (d *daemon) wsURL(name string) string  { return d.wsBase + name + "?token=" + token }

// httpURL is server name's Streamable HTTP endpoint (the token goes in a
// header).
func (d *daemon) httpURL(name string) string {
	return "http://" + strings.TrimPrefix(d.wsBase, "ws://") + name
}

var (
	webURL      = regexp.MustCompile(`url=ws://([^/\s]+)/servers/NAME`)
	serverReady = regexp.MustCompile(`msg="server ready"`)
)

// startDaemon runs `mcpmux serve` in dir with servers (started eagerly) and
// a web listener, and returns once every server is ready and the sockets
// and the listener answer. maxSessions is each server's max_sessions.
func startDaemon(ctx context.Context, dir, mcpmux string, maxSessions int, servers ...serverConf) (*daemon, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	d := &daemon{config: filepath.Join(dir, "mux.toml"), sockets: filepath.Join(dir, "s"), log: &syncBuffer{}, exited: make(chan struct{})}
	var b strings.Builder
	// The web listener's connection cap (1024 by default) would hold back
	// the many-sessions steps over WebSocket and HTTP.
	fmt.Fprintf(&b, "[daemon]\nlog_level = \"info\"\nmax_http_sessions = %d\n\n[listen]\nsocket_dir = %q\nhttp = \"127.0.0.1:0\"\nhttp_token = %q\nhttp_max_connections = %d\n",
		maxSessions, d.sockets, token, 2*maxSessions)
	for _, s := range servers {
		args := make([]string, len(s.argv)-1)
		for i, a := range s.argv[1:] {
			args[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "\n[servers.%s]\ncommand = %q\nargs = [%s]\nmax_sessions = %d\nstdin_grace = \"1s\"\ninherit_env = [\"GORACE\"]\n",
			s.name, s.argv[0], strings.Join(args, ", "), maxSessions)
		if s.protocol != "" {
			fmt.Fprintf(&b, "protocol = %q\n", s.protocol)
		}
	}
	if err := os.WriteFile(d.config, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	d.cmd = exec.Command(mcpmux, "serve", "--config", d.config)
	// A state folder of the run's own: the HTTP steps leave thousands of
	// session records, which must neither fill the user's folder nor be
	// found there by the next run's daemon.
	env := raceEnv()
	if env == nil {
		env = os.Environ()
	}
	d.cmd.Env = append(env, "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	d.cmd.Stderr = d.log
	d.cmd.WaitDelay = 5 * time.Second
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { // owned by stop, which waits for exited
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	err := poll(ctx, "mcpmux serve", d.exited, func() (bool, error) {
		log := d.log.String()
		if m := webURL.FindStringSubmatch(log); m != nil {
			d.wsBase = "ws://" + m[1] + "/servers/"
		}
		if d.wsBase == "" || len(serverReady.FindAllStringIndex(log, -1)) < len(servers) {
			return false, nil
		}
		for _, s := range servers {
			c, err := net.Dial("unix", d.socket(s.name))
			if err != nil {
				return false, nil
			}
			c.Close()
		}
		return true, nil
	})
	if err != nil {
		return nil, errors.Join(err, d.stop(), fmt.Errorf("its log:\n%s", d.log.String()))
	}
	return d, nil
}

// raceEnv is our environment, with a short GORACE exit pause for an mcpmux
// built with -race (it sleeps 1 s before exiting by default).
func raceEnv() []string {
	if os.Getenv("GORACE") != "" {
		return nil
	}
	return append(os.Environ(), "GORACE=atexit_sleep_ms=50")
}

// stop sends SIGTERM and waits; the daemon must exit 0.
func (d *daemon) stop() error {
	d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case <-d.exited:
	case <-t.C:
		d.cmd.Process.Kill()
		<-d.exited
	}
	if d.waitErr != nil {
		return fmt.Errorf("mcpmux serve: %w; its log ends:\n%s", d.waitErr, tail(d.log.String(), 2000))
	}
	return nil
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// relay is the floor: integration/bench/relay, a process of its own (as
// mcpmux is) in which each accepted Unix connection gets its own server
// process and two io.Copy loops pass the bytes, nothing parsed.
type relay struct {
	path string
	p    *proc
}

func startRelay(ctx context.Context, bin, path string, argv []string) (*relay, error) {
	p, err := spawn(append([]string{bin, path}, argv...), nil, os.Stderr)
	if err != nil {
		return nil, err
	}
	r := &relay{path: path, p: p}
	err = poll(ctx, "the relay", p.exited, func() (bool, error) {
		c, err := net.Dial("unix", path)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// stop closes the relay's stdin, on which it closes its connections and
// waits for its servers.
func (r *relay) stop() { r.p.stop(5 * time.Second) }

// gateway is supergateway's stdio→WebSocket mode, run with node (not npx,
// whose wrapper would survive a SIGTERM) in front of one server process,
// which it starts at once and shares among its WebSocket clients.
type gateway struct {
	name    string // in errors; "" is supergateway
	p       *proc
	url     string
	drained chan struct{} // closed when its stdout has ended
}

func startGateway(ctx context.Context, node, entry string, argv []string) (*gateway, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	// Its stdin stays open until stop: supergateway exits when it closes.
	p, err := spawn([]string{node, entry, "--stdio", strings.Join(quoted, " "),
		"--outputTransport", "ws", "--port", strconv.Itoa(port), "--logLevel", "none"}, nil, nil)
	if err != nil {
		return nil, err
	}
	g := &gateway{p: p, url: fmt.Sprintf("ws://127.0.0.1:%d/message", port), drained: make(chan struct{})}
	// It prints a line to stdout for every notification a client sends,
	// whatever its log level; that must not fill the pipe.
	go func() { // waited for by stop, through drained
		io.Copy(io.Discard, p.stdout)
		close(g.drained)
	}()
	err = poll(ctx, "supergateway", p.exited, func() (bool, error) {
		c, err := dialWS(g.url)
		if err != nil {
			return false, nil
		}
		return true, c.Close()
	})
	if err != nil {
		return nil, errors.Join(err, g.stop())
	}
	return g, nil
}

// stop sends SIGTERM to supergateway, which stops its server's process
// group, and reaps it. A descendant still alive after that is killed and
// reported.
func (g *gateway) stop() error {
	kids, _ := descendants(g.p.pid())
	g.p.cmd.Process.Signal(syscall.SIGTERM)
	killed := !g.p.waitFor(10 * time.Second)
	if killed {
		syscall.Kill(-g.p.pid(), syscall.SIGKILL)
		<-g.p.exited
	}
	g.p.stdin.Close()
	var left []int
	for _, pid := range kids {
		if alive(pid) {
			left = append(left, pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	<-g.drained
	g.p.stdout.Close()
	name := cmp.Or(g.name, "supergateway")
	switch {
	case len(left) > 0:
		return fmt.Errorf("%s left processes %v running (killed them)", name, left)
	case killed:
		return fmt.Errorf("%s ignored SIGTERM for 10 s (killed it)", name)
	case g.p.err != nil:
		return fmt.Errorf("%s: %w", name, g.p.err)
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
