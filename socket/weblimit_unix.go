//go:build unix

package socket

import (
	"net"
	"syscall"
)

// peekInput copies into buf what the kernel holds of c's input, not yet read,
// without taking it; 0 when nothing is there.
func peekInput(c net.Conn, buf []byte) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	// Control, not Read: Read would wait for the connection's own reader.
	raw.Control(func(fd uintptr) {
		k, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == nil && k > 0 {
			n = k
		}
	})
	return n
}
