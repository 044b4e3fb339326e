// Command relay is the floor of the side-by-side benchmark: what any proxy
// in its own process pays on this machine. It listens on a Unix socket and
// joins each accepted connection to a server process of its own with two
// io.Copy loops, nothing parsed. It runs until its stdin closes, then
// closes its connections and waits for its servers.
//
//	relay SOCKET SERVER [ARGS...]
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: relay SOCKET SERVER [ARGS...]")
		os.Exit(2)
	}
	ln, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	go func() { // returns with the process; it only closes things
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Go(func() {
			serve(c, os.Args[2:])
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		})
	}
	wg.Wait()
}

// serve runs one server for c and copies bytes both ways until c closes.
func serve(c net.Conn, argv []string) {
	defer c.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		return
	}
	copied := make(chan struct{})
	go func() { // waited for below
		io.Copy(c, stdout)
		close(copied)
	}()
	io.Copy(stdin, c)
	stdin.Close() // the server's EOF: it exits, and its stdout ends
	<-copied
	cmd.Wait()
}
