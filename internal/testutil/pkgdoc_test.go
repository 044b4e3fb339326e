package testutil_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestPackageDocs is the package-doc check of mcpmux's module: every
// package says what it owns, in one doc comment. (The integration module
// runs its own.)
func TestPackageDocs(t *testing.T) {
	root := testutil.ModuleRoot(t)
	_, err := os.Stat(filepath.Join(root, "cmd", "mcpmux"))
	require.NoError(t, err, "%s is mcpmux's module root", root)
	testutil.CheckPackageDocs(t, root)
}

func TestPackageDocProblems(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string // path relative to the module root -> contents
		want     []string
		packages int
	}{
		{
			name: "documented",
			files: map[string]string{
				"a/doc.go":            "// Package a owns a.\npackage a\n",
				"a/a.go":              "package a\n",
				"a/a_test.go":         "package a\n",
				"cmd/x/main.go":       "// Command x runs.\npackage main\n",
				"b/b.go":              "// Package b\npackage b\n",
				"c/c.go":              "// Package main of c.\npackage main\n",
				"d/ignored.go":        "// nothing\n//go:build ignore\n\npackage d\n",
				"testdata/t.go":       "package t\n",
				"_old/o.go":           "package o\n",
				".hidden/h.go":        "package h\n",
				"node_modules/n/n.go": "package n\n",
				"nested/go.mod":       "module nested\n",
				"nested/n.go":         "package nested\n",
			},
			packages: 4,
		},
		{
			name:     "no doc",
			files:    map[string]string{"a/a.go": "package a\n"},
			want:     []string{`a: package a has no doc comment: add "// Package a ..." to one file`},
			packages: 1,
		},
		{
			name:     "a doc that does not name the package",
			files:    map[string]string{"a/a.go": "// Package ab owns a.\npackage a\n"},
			want:     []string{`a: a package doc comment must start "Package a": a/a.go: Package ab owns a.`},
			packages: 1,
		},
		{
			name:     "a command's doc",
			files:    map[string]string{"cmd/x/main.go": "// X runs.\npackage main\n"},
			want:     []string{`cmd/x: a package doc comment must start "Command <name>": cmd/x/main.go: X runs.`},
			packages: 1,
		},
		{
			name: "two docs",
			files: map[string]string{
				"a/a.go": "// Package a owns a.\npackage a\n",
				"a/b.go": "// Package a owns b too.\npackage a\n",
			},
			want:     []string{"a: package a has a doc comment in 2 files; it needs one: [a/a.go a/b.go]"},
			packages: 1,
		},
		{
			name: "doc.go without the doc",
			files: map[string]string{
				"a/doc.go": "package a\n",
				"a/a.go":   "// Package a owns a.\npackage a\n",
			},
			want:     []string{"a: package a has a doc.go, but its doc comment is in a/a.go"},
			packages: 1,
		},
		{
			name: "two package names in one folder",
			files: map[string]string{
				"a/a.go": "// Package a owns a.\npackage a\n",
				"a/b.go": "package b\n",
			},
			want:     []string{"a/b.go: package b, but a is package a"},
			packages: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module m\n"), 0o600))
			for name, text := range tt.files {
				path := filepath.Join(root, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
				require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
			}
			got, n, err := testutil.PackageDocProblems(root)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "problems")
			assert.Equal(t, tt.packages, n, "packages read")
		})
	}
}

func TestPackageDocProblemsOfAMissingFolder(t *testing.T) {
	_, _, err := testutil.PackageDocProblems(filepath.Join(t.TempDir(), "none"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
