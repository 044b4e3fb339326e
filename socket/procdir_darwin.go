package socket

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"strconv"
	"strings"
)

// ProcessDir is the working folder of process pid: for a client of the
// daemon, the folder its editor started it in. macOS has no /proc: lsof
// says it (it ships with the system).
func ProcessDir(pid int) (string, error) {
	if pid <= 0 {
		return "", errors.New("socket: no process")
	}
	out, err := exec.Command("/usr/sbin/lsof", "-a", "-p", strconv.Itoa(pid), "-d", "cwd", "-Fn").Output()
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if dir, ok := strings.CutPrefix(sc.Text(), "n"); ok {
			return dir, nil
		}
	}
	return "", errors.New("socket: lsof named no folder")
}
