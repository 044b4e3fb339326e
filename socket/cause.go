package socket

import (
	"errors"
	"net"
	"os"
)

// Cause is what the OS said of a failed dial, read or write on a
// connection ("connection refused", "no such file or directory"), without
// the *net.OpError and *os.SyscallError around it; err itself when it has
// neither.
func Cause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return se.Err
		}
		return op.Err
	}
	return err
}
