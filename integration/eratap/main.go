// Command eratap runs a stdio MCP server and records what it sees: it
// relays its own stdin to the server and the server's stdout to its own,
// line by line and byte for byte, and appends every line, and every line the
// server writes on stderr, to a log. The era tests (../eras_helpers_test.go)
// put it in front of their probe servers, so that the server's side of a
// connection is on record too: directly, the same wire the client saw; behind
// mcpmux, the hop from the daemon to the server.
//
//	eratap LOG COMMAND [ARG...]
//
// LOG gets one JSON object per line, appended with one write each, so that
// several taps (a client may start the same command twice) can share it:
//
//	{"tap":PID,"start":["COMMAND","ARG",...]}
//	{"tap":PID,"dir":"to","msg":MESSAGE}      a line to the server
//	{"tap":PID,"dir":"from","msg":MESSAGE}    a line from the server
//	{"tap":PID,"dir":"stderr","text":"..."}   a line of the server's stderr
//	{"tap":PID,"exit":CODE}
//
// MESSAGE is the line as it was when it is valid JSON, else a string. A
// line is logged before it is passed on. SIGTERM and SIGINT are passed to
// the server; eratap exits with the server's exit code once the server's
// stdout and stderr have ended.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: eratap LOG COMMAND [ARG...]")
		os.Exit(2)
	}
	f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "eratap:", err)
		os.Exit(2)
	}
	os.Exit(run(&logger{f: f, pid: os.Getpid()}, os.Args[2:]))
}

// logger appends records to the log, one write per record.
type logger struct {
	mu  sync.Mutex
	f   *os.File
	pid int
}

func (l *logger) record(fields map[string]any) {
	fields["tap"] = l.pid
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Write(append(b, '\n'))
}

// line records one relayed line in direction dir.
func (l *logger) line(dir string, line []byte) {
	trimmed := strings.TrimSpace(string(line))
	if trimmed == "" {
		return
	}
	var msg any = trimmed
	if json.Valid([]byte(trimmed)) {
		msg = json.RawMessage(trimmed)
	}
	l.record(map[string]any{"dir": dir, "msg": msg})
}

func run(l *logger, argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	toServer, err := cmd.StdinPipe()
	if err != nil {
		return fail(err)
	}
	fromServer, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	serverErr, err := cmd.StderrPipe()
	if err != nil {
		return fail(err)
	}
	l.record(map[string]any{"start": argv})
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() { // ends with the process
		for s := range signals {
			cmd.Process.Signal(s)
		}
	}()
	// Stdin is relayed until it ends (then the server's stdin is closed) or
	// until the process exits, whichever comes first.
	go func() {
		relay(l, "to", os.Stdin, toServer)
		toServer.Close()
	}()
	var outputs sync.WaitGroup
	outputs.Go(func() { relay(l, "from", fromServer, os.Stdout) })
	outputs.Go(func() { copyStderr(l, serverErr) })
	outputs.Wait()
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if code < 0 {
			code = 1 // killed by a signal
		}
	} else if err != nil {
		return fail(err)
	}
	l.record(map[string]any{"exit": code})
	return code
}

// relay copies r to w line by line, logging each line before passing it
// on, until r ends or w fails.
func relay(l *logger, dir string, r io.Reader, w io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			l.line(dir, line)
			if _, werr := w.Write(line); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// copyStderr passes the server's stderr on and logs its lines.
func copyStderr(l *logger, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l.record(map[string]any{"dir": "stderr", "text": sc.Text()})
		fmt.Fprintln(os.Stderr, sc.Text())
	}
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "eratap:", err)
	return 2
}
