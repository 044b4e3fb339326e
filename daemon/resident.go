package daemon

import (
	"os"
	"strconv"
	"strings"
)

// ResidentBytes reads the daemon's resident set size from /proc; 0 where
// there is no /proc (macOS).
func ResidentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
