package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/socket"
	"github.com/mcpmux/mcpmux/upstream"
)

// MaxServerNameLen bounds a server's name, which names its socket file.
const MaxServerNameLen = 64

// ValidServerName reports whether name matches [A-Za-z0-9][A-Za-z0-9._-]*
// and is at most MaxServerNameLen bytes: it becomes a socket file name and a
// URL path segment.
func ValidServerName(name string) bool {
	if name == "" || len(name) > MaxServerNameLen {
		return false
	}
	for i, r := range name {
		alnum := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '.' && r != '_' && r != '-') {
			return false
		}
	}
	return true
}

// ValidEnvName reports whether n can be an environment variable's name.
func ValidEnvName(n string) bool {
	return n != "" && !strings.ContainsAny(n, "=\x00")
}

// hasNUL reports whether s holds a NUL byte, which exec cannot pass on.
func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

// command checks a server's command. One with a slash is a path, resolved
// against the config's folder; one without is kept for a PATH lookup at each
// start.
func (d *decoder) command(p keyPath, c string) string {
	switch {
	case strings.TrimSpace(c) == "":
		d.errorf(p, "must not be empty")
	case hasNUL(c):
		d.errorf(p, "must not contain NUL bytes")
	case strings.Contains(c, "/"):
		return d.resolve(c)
	case strings.ContainsFunc(c, IsSpace):
		d.errorf(p, "%q: command must be a single executable; put arguments in args", c)
	}
	return c
}

// IsSpace reports whether r is ASCII white space.
func IsSpace(r rune) bool { return strings.ContainsRune(" \t\n\r\v\f", r) }

// cwd checks a server's working folder: absolute and existing. Relative
// paths are refused rather than resolved, so the folder is never a guess.
func (d *decoder) cwd(p keyPath, c string) string {
	if c == "" {
		return ""
	}
	if !filepath.IsAbs(c) {
		d.errorf(p, "%q must be an absolute path", c)
		return ""
	}
	c = filepath.Clean(c)
	fi, err := os.Stat(c)
	switch {
	case errors.Is(err, os.ErrNotExist):
		d.errorf(p, "%q does not exist", c)
	case err != nil:
		d.errorf(p, "%v", err)
	case !fi.IsDir():
		d.errorf(p, "%q is not a directory", c)
	}
	return c
}

// projectRoots decodes the folders a project may be in: absolute paths,
// or "~" and "~/..." for the user's home folder, cleaned. A folder that
// does not exist yet is allowed: nothing in it can be a project until it
// does.
func (d *decoder) projectRoots(p keyPath, roots []string) []string {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		if r == "~" || strings.HasPrefix(r, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				d.errorf(p, "%q: %v", r, err)
				continue
			}
			r = filepath.Join(home, r[1:])
		}
		if !filepath.IsAbs(r) {
			d.errorf(p, "%q must be an absolute path, or start with ~/", r)
			continue
		}
		out = append(out, filepath.Clean(r))
	}
	return out
}

// stderr decodes where a server's stderr goes: a mode, and for "file:PATH"
// the absolute file.
func (d *decoder) stderr(p keyPath, v string) (upstream.StderrMode, string) {
	switch {
	case v == "log":
		return upstream.StderrLog, ""
	case v == "inherit":
		return upstream.StderrInherit, ""
	case v == "discard":
		return upstream.StderrDiscard, ""
	case strings.HasPrefix(v, "file:"):
		f := strings.TrimPrefix(v, "file:")
		if f == "" {
			d.errorf(p, `"file:" needs a path, as in "file:/var/log/mcp.log"`)
			return upstream.StderrLog, ""
		}
		return upstream.StderrFile, d.resolve(f)
	}
	d.errorf(p, `invalid value %q: want "log", "inherit", "discard" or "file:PATH"`, v)
	return upstream.StderrLog, ""
}

// resolve makes a path from the file absolute, relative to the config's folder.
func (d *decoder) resolve(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(d.dir, path)
}

// The accessors below check a value and record an error naming the key
// when it is wrong; ok reports whether the value is usable.
// sizeUnit returns the multiplier of a unit parseSize knows, ignoring case.
func sizeUnit(unit string) (int64, bool) {
	switch strings.ToLower(unit) {
	case "", "b":
		return 1, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	case "kib":
		return 1 << 10, true
	case "mib":
		return 1 << 20, true
	case "gib":
		return 1 << 30, true
	}
	return 0, false
}

// parseSize parses a whole number of bytes followed by an optional unit,
// without spaces: "1048576", "100B", "512KiB", "16MiB", "1GiB", or the decimal
// "2MB" (KB, MB and GB are powers of 1000). Units ignore case. Signs,
// fractions and values beyond int64 are refused.
func parseSize(s string) (int64, error) {
	digits := s[:len(s)-len(strings.TrimLeft(s, "0123456789"))]
	unit := s[len(digits):]
	mult, ok := sizeUnit(unit)
	if digits == "" || !ok {
		return 0, fmt.Errorf(`invalid size %q: want a whole number of bytes with an optional unit: B, KB, MB, GB, KiB, MiB, GiB (as in "16MiB")`, s)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// FormatSize writes n with the largest binary unit that divides it exactly.
func FormatSize(n int) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.Itoa(n>>30) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// DefaultSocketDir is the socket folder when socket_dir is not set: one
// that depends on the user alone (socket.DefaultDir), never on variables
// the clients that start `mcpmux connect` strip from its environment, so
// that the daemon and every client agree. note, when not empty, says why
// it is not the usual folder.
func DefaultSocketDir(uid int) (dir, note string) {
	dir, note, err := socket.DefaultDir(uid, func() string { return Home(uid) })
	if err != nil {
		return "/tmp/mcpmux-" + strconv.Itoa(uid), err.Error()
	}
	return dir, note
}

// Home is the user's home folder: the account's, else $HOME. The
// account's comes first: a client may have been started without HOME.
func Home(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && filepath.IsAbs(u.HomeDir) {
		return u.HomeDir
	}
	return os.Getenv("HOME")
}

// roots checks roots: "sessions", or an array of file:// URIs.
func (d *decoder) roots(p keyPath, v any) (list []string, fromSessions bool) {
	if str, isStr := v.(string); isStr {
		if str != "sessions" {
			d.errorf(p, "invalid value %q: want \"sessions\" or an array of root URIs", str)
		}
		return nil, str == "sessions"
	}
	list, ok := d.strs(p, v)
	if !ok {
		return nil, false
	}
	for _, r := range list {
		if !strings.HasPrefix(r, "file://") {
			d.errorf(p, "invalid root %q: roots are file:// URIs", r)
		}
	}
	return list, false
}

// env checks a server's env table: variable names to string values.
func (d *decoder) env(p keyPath, t map[string]any) map[string]string {
	env := make(map[string]string, len(t))
	for name, v := range t {
		vp := p.with(name)
		s, ok := as[string](d, vp, v, "a string")
		switch {
		case !ok:
		case !ValidEnvName(name):
			d.errorf(vp, "invalid variable name: it must be non-empty, without '=' or NUL")
		case hasNUL(s):
			d.errorf(vp, "must not contain NUL bytes")
		default:
			env[name] = s
		}
	}
	return env
}
