//go:build !linux

package benchkit

import (
	"errors"
	"syscall"
)

// canMeasureMemory: the memory figures need Linux's /proc; elsewhere they
// are left out.
const canMeasureMemory = false

var errNoProc = errors.New("memory figures need Linux's /proc")

func memOf(int) (Memory, error)      { return Memory{}, errNoProc }
func peakOf(int) (int64, error)      { return 0, errNoProc }
func sumMem([]int) (Memory, error)   { return Memory{}, errNoProc }
func descendants(int) ([]int, error) { return nil, errNoProc }
func openFileLimit(int) (int, error) { return 0, errNoProc }

// alive reports whether pid exists (a zombie counts as alive here).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }
