// Command bridge is the floor of the `mcpmux connect` path of the
// side-by-side benchmark: what any stdio bridge pays for its extra process.
// It dials a Unix socket and copies stdin to it and it to stdout, nothing
// parsed; at stdin's end it shuts the socket's writing side and exits when
// the socket's answers have ended.
//
//	bridge SOCKET
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: bridge SOCKET")
		os.Exit(2)
	}
	c, err := net.Dial("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bridge:", err)
		os.Exit(1)
	}
	go func() { // ends with the process
		io.Copy(c, os.Stdin)
		c.(*net.UnixConn).CloseWrite()
	}()
	io.Copy(os.Stdout, c)
}
