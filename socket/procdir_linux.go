package socket

import (
	"errors"
	"os"
	"strconv"
)

// ProcessDir is the working folder of process pid: for a client of the
// daemon, the folder its editor started it in.
func ProcessDir(pid int) (string, error) {
	if pid <= 0 {
		return "", errors.New("socket: no process")
	}
	return os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
}
