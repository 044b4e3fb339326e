// Package buildinfo says what is known of how an mcpmux binary was built:
// the version stamped at link time, else the module version or the VCS
// revision the go command records in the build info.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Build is what is known of how this mcpmux was built.
type Build struct {
	Version  string // a release or module version, "dev-<rev>" for a checkout, "dev" when nothing is known
	Commit   string // the VCS revision; "" when unknown
	Time     string // the commit's time, RFC 3339; "" when unknown
	Modified bool   // the checkout had uncommitted changes
	Go       string // the toolchain that built it
}

// From decides the version from what was stamped at link time and
// the build info (nil when there is none).
func From(stamped, stampedCommit string, bi *debug.BuildInfo) Build {
	v := Build{Version: stamped, Commit: stampedCommit, Go: runtime.Version()}
	if bi == nil {
		if v.Version == "" {
			v.Version = "dev"
		}
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if v.Commit == "" {
				v.Commit = s.Value
			}
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	switch {
	case v.Version != "":
	case bi.Main.Version != "" && bi.Main.Version != "(devel)" && !(untagged(bi.Main.Version) && v.Commit != ""):
		v.Version = bi.Main.Version
	case v.Commit != "":
		v.Version = "dev-" + short(v.Commit)
		if v.Modified {
			v.Version += "-dirty"
		}
	default:
		v.Version = "dev"
	}
	return v
}

// untagged reports whether a module version is the pseudo-version Go
// gives a commit with no tag before it ("v0.0.0-20260520100000-0123456789ab"):
// the revision says the same, shorter.
func untagged(modVersion string) bool { return strings.HasPrefix(modVersion, "v0.0.0-") }

// short is a revision cut to 12 characters, as git shows them.
func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// String is the version with what else is known, on one line:
// "v1.2.3 (commit 0123456789ab, 2026-05-20T10:00:00Z; go1.26.8 linux/amd64)".
func (v Build) String() string {
	var about []string
	if v.Commit != "" && !strings.Contains(v.Version, short(v.Commit)) {
		about = append(about, "commit "+short(v.Commit))
	}
	if v.Time != "" {
		about = append(about, v.Time)
	}
	if v.Modified && !strings.Contains(v.Version, "dirty") {
		about = append(about, "modified")
	}
	platform := v.Go + " " + runtime.GOOS + "/" + runtime.GOARCH
	if len(about) == 0 {
		return fmt.Sprintf("%s (%s)", v.Version, platform)
	}
	return fmt.Sprintf("%s (%s; %s)", v.Version, strings.Join(about, ", "), platform)
}
