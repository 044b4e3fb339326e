// Command fakedocker stands in for the docker CLI in the container tests.
// Like the real one, it has a daemon start the container, so that the
// container is no descendant of whoever ran the CLI: killing the CLI, its
// process group or mcpmux's whole tree leaves the container running, and
// only "docker kill" stops it. The engine daemon is the test process itself
// (fakeEngine in container_test.go), reached on the unix socket that
// FAKEDOCKER_DAEMON names, one request line and one answer line per
// connection.
//
//	docker [OPTIONS] run [RUN OPTIONS] IMAGE [ARGS]
//	    asks the daemon to start a container; writes its id to --cidfile,
//	    which must not exist yet (as docker insists); then becomes the MCP
//	    server the container "runs" by exec'ing FAKEDOCKER_SERVER, with
//	    the same pid, as the real CLI stays attached to it.
//	docker kill ID
//	    asks the daemon to kill the container; prints the id, or fails
//	    with the daemon's message as docker does.
//	docker __container
//	    the container: sleeps until it is killed, ignoring stdin and SIGTERM.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: docker run|kill ...")
	}
	switch os.Args[1] {
	case "__container":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		select {}
	case "kill":
		if len(os.Args) != 3 {
			fail("usage: docker kill ID")
		}
		answer := ask("kill " + os.Args[2])
		if answer != "ok" {
			fail("Error response from daemon: " + answer)
		}
		fmt.Println(os.Args[2])
	default:
		run(os.Args[1:])
	}
}

// run is "docker [OPTIONS] run [RUN OPTIONS] IMAGE [ARGS]".
func run(args []string) {
	at := -1
	for i, a := range args {
		if a == "run" {
			at = i
			break
		}
	}
	if at < 0 {
		fail(fmt.Sprintf("unknown command %q", args))
	}
	var cidfile string
	for i, a := range args[at+1:] {
		if v, ok := strings.CutPrefix(a, "--cidfile="); ok {
			cidfile = v
		} else if a == "--cidfile" && at+2+i < len(args) {
			cidfile = args[at+2+i]
		}
	}
	var f *os.File
	if cidfile != "" {
		var err error
		if f, err = os.OpenFile(cidfile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
			fail("container ID file found, make sure the other container isn't running or delete " + cidfile)
		}
	}
	id := ask("run")
	if strings.HasPrefix(id, "error") {
		fail(id)
	}
	if f != nil {
		_, err := f.WriteString(id)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fail(err.Error())
		}
	}
	server := os.Getenv("FAKEDOCKER_SERVER")
	if err := syscall.Exec(server, []string{server}, os.Environ()); err != nil {
		fail(fmt.Sprintf("exec %s: %v", server, err))
	}
}

// ask sends one request to the daemon and returns its answer.
func ask(req string) string {
	c, err := net.Dial("unix", os.Getenv("FAKEDOCKER_DAEMON"))
	if err != nil {
		fail("Cannot connect to the Docker daemon: " + err.Error())
	}
	defer c.Close()
	if _, err := fmt.Fprintln(c, req); err != nil {
		fail(err.Error())
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fail("the daemon hung up: " + err.Error())
	}
	return strings.TrimSpace(line)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "docker:", msg)
	os.Exit(125)
}
