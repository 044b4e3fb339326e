package benchkit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// canMeasureMemory: on Linux the memory figures come from /proc.
const canMeasureMemory = true

// stat returns the parent and the state of pid from /proc/PID/stat.
func stat(pid int) (ppid int, state byte, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	_, state, err := stat(pid)
	return err == nil && state != 'Z'
}

// descendants returns the processes below pid, at any depth.
func descendants(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, _, err := stat(p)
		if err != nil {
			continue // it exited meanwhile
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out, nil
}

// memOf reads VmRSS from /proc/PID/status and Pss from /proc/PID/smaps_rollup.
func memOf(pid int) (Memory, error) {
	rss, err := procKB(filepath.Join("/proc", strconv.Itoa(pid), "status"), "VmRSS:")
	if err != nil {
		return Memory{}, err
	}
	pss, err := procKB(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"), "Pss:")
	if err != nil {
		return Memory{}, err
	}
	return Memory{rss, pss}, nil
}

// peakOf is VmHWM, the peak resident set, of pid.
func peakOf(pid int) (int64, error) {
	return procKB(filepath.Join("/proc", strconv.Itoa(pid), "status"), "VmHWM:")
}

// sumMem is memOf summed over pids.
func sumMem(pids []int) (Memory, error) {
	var sum Memory
	for _, p := range pids {
		m, err := memOf(p)
		if err != nil {
			return Memory{}, fmt.Errorf("memory of process %d: %w", p, err)
		}
		sum = sum.plus(m)
	}
	return sum, nil
}

// procKB returns the value, in bytes, of the first line of file that
// starts with key and is counted in kB.
func procKB(file, key string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, key); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %w", file, line, err)
			}
			return v << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s line", file, key)
}

// openFileLimit is the soft RLIMIT_NOFILE of pid.
func openFileLimit(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if f[0] == "unlimited" {
					return 1 << 30, nil
				}
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, errors.New("no Max open files line in /proc/PID/limits")
}
