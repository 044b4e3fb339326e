package socket

import (
	"path/filepath"
	"strconv"
)

// DefaultDir returns the default socket folder: xdgRuntimeDir/mcpmux when
// xdgRuntimeDir (the caller's $XDG_RUNTIME_DIR) is set, else /tmp/mcpmux-<uid>.
// A relative xdgRuntimeDir counts as unset, as the XDG base directory spec
// asks. The fallback is /tmp rather than os.TempDir: $TMPDIR on macOS is a
// long per-user path that leaves little of sun_path's 104 bytes for the
// socket names, and the package reads no environment of its own.
func DefaultDir(xdgRuntimeDir string, uid int) string {
	if xdgRuntimeDir != "" && filepath.IsAbs(xdgRuntimeDir) {
		return filepath.Join(xdgRuntimeDir, "mcpmux")
	}
	return "/tmp/mcpmux-" + strconv.Itoa(uid)
}
