package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPackageDocs fails for any package in the module whose doc comment does
// not say what it owns, as tailscale's pkgdoc_test does: every directory of
// non-test Go files needs a "// Package x ..." comment on one file (for a
// command, "// Command x ..." or "// Package main ...").
func TestPackageDocs(t *testing.T) {
	root := moduleRoot(t)
	type pkg struct {
		name string
		docs []string // files with a package doc comment, relative to root
		bad  []string // "file: first line" of doc comments that do not name the package
	}
	pkgs := map[string]*pkg{} // directory relative to root -> package
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			switch {
			case path == root:
				return nil
			case name == "testdata", name == "bin", name == "vendor",
				strings.HasPrefix(name, "."), strings.HasPrefix(name, "_"):
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if ignored(f.Comments) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(rel)
		p := pkgs[dir]
		if p == nil {
			p = &pkg{name: f.Name.Name}
			pkgs[dir] = p
		}
		if p.name != f.Name.Name {
			t.Errorf("%s: package %s, but %s is package %s", rel, f.Name.Name, dir, p.name)
		}
		if f.Doc == nil {
			return nil
		}
		text := f.Doc.Text()
		if docNamesPackage(text, f.Name.Name) {
			p.docs = append(p.docs, rel)
		} else {
			first, _, _ := strings.Cut(text, "\n")
			p.bad = append(p.bad, rel+": "+first)
		}
		return nil
	})
	require.NoError(t, err, "walking %s", root)
	require.NotEmpty(t, pkgs, "no Go packages under %s", root)

	dirs := make([]string, 0, len(pkgs))
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		p := pkgs[dir]
		for _, b := range p.bad {
			t.Errorf("%s: a package doc comment must start %q: %s", dir, wantStart(p.name), b)
		}
		switch len(p.docs) {
		case 0:
			if len(p.bad) == 0 {
				t.Errorf("%s: package %s has no doc comment: add %q to one file (tailscale's pkgdoc rule)", dir, p.name, "// "+wantStart(p.name)+" ...")
			}
		case 1:
		default:
			t.Logf("%s: package %s is documented in %d files; one would do: %v", dir, p.name, len(p.docs), p.docs)
		}
	}
	t.Logf("%d packages checked", len(pkgs))
}

func docNamesPackage(text, name string) bool {
	if name == "main" {
		return strings.HasPrefix(text, "Command ") || strings.HasPrefix(text, "Package main")
	}
	return strings.HasPrefix(text, "Package "+name+" ") || strings.HasPrefix(text, "Package "+name+"\n")
}

func wantStart(name string) string {
	if name == "main" {
		return "Command <name>"
	}
	return "Package " + name
}

// ignored reports a file kept out of every build by "//go:build ignore".
func ignored(comments []*ast.CommentGroup) bool {
	for _, g := range comments {
		for _, c := range g.List {
			if c.Text == "//go:build ignore" {
				return true
			}
		}
	}
	return false
}

// moduleRoot walks up from the test's directory to the folder of go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		_, err := os.Stat(filepath.Join(dir, "go.mod"))
		if err == nil {
			return dir
		}
		require.True(t, errors.Is(err, fs.ErrNotExist), "stat go.mod in %s: %v", dir, err)
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

func TestDocNamesPackage(t *testing.T) {
	tests := []struct {
		text, name string
		want       bool
	}{
		{"Package session is one connection.\n", "session", true},
		{"Package session\n", "session", true},
		{"Package sessions are fun.\n", "session", false},
		{"package session is lower case.\n", "session", false},
		{"Session is one connection.\n", "session", false},
		{"Command mcpmux runs servers.\n", "main", true},
		{"Package main runs servers.\n", "main", true},
		{"Mcpmux runs servers.\n", "main", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, docNamesPackage(tt.text, tt.name), "docNamesPackage(%q, %q)", tt.text, tt.name)
	}
}
