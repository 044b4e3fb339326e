package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The version: what was stamped at link time wins; else the module version
// (a tag), else the checkout's revision, else "dev".
func TestVersionFrom(t *testing.T) {
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-05-20T10:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name            string
		stamped, commit string
		bi              *debug.BuildInfo
		want            string
	}{
		{"stamped by scripts/release", "v1.2.3", "fedcba9876543210", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"v1.2.3 (commit fedcba987654; go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{"go install at a tag", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"v1.2.3 (go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{"a checkout past a tag", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.4-0.20260520100000-0123456789ab+dirty"}, Settings: vcs("true")},
			"v1.2.4-0.20260520100000-0123456789ab+dirty (2026-05-20T10:00:00Z; go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{"a checkout with no tag", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20260520100000-0123456789ab"}, Settings: vcs("false")},
			"dev-0123456789ab (2026-05-20T10:00:00Z; go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{"a modified checkout, no module version", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")},
			"dev-0123456789ab-dirty (2026-05-20T10:00:00Z; go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{"-buildvcs=false", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"dev (go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{"no build info", "", "", nil, "dev (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"},
	} {
		assert.Equal(t, tc.want, From(tc.stamped, tc.commit, tc.bi).String(), tc.name)
	}
}
