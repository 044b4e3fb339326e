package testutil

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// CheckPackageDocs fails t for each package of the module rooted at root
// that does not say what it owns (STYLE rule 7, after tailscale's
// pkgdoc_test): see PackageDocProblems. It logs how many packages it read.
func CheckPackageDocs(t testing.TB, root string) {
	t.Helper()
	problems, n, err := PackageDocProblems(root)
	if err != nil {
		t.Fatalf("package docs under %s: %v", root, err)
	}
	if n == 0 {
		t.Fatalf("no Go packages under %s", root)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d packages checked under %s", n, root)
}

// PackageDocProblems reads the package clause and doc comment of every
// non-test Go file of the module rooted at root (skipping nested modules,
// testdata, vendor, bin, node_modules, and names starting with "." or "_")
// and returns what is wrong, one line per problem, and how many packages it
// found. Each package must have exactly one doc comment, "// Package x ..."
// ("// Command x ..." or "// Package main ..." for a command); a package
// with a doc.go keeps it there. Files under "//go:build ignore" do not
// count.
func PackageDocProblems(root string) (problems []string, packages int, err error) {
	pkgs, problems, err := readPackages(root)
	if err != nil {
		return nil, 0, err
	}
	dirs := make([]string, 0, len(pkgs))
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		problems = append(problems, pkgs[dir].problems(dir)...)
	}
	return problems, len(pkgs), nil
}

// docPackage is what PackageDocProblems learns of one package.
type docPackage struct {
	name  string
	docs  []string // files with a doc comment that names the package, relative to root
	bad   []string // "file: first line" of doc comments that do not
	docGo bool     // the package has a doc.go
}

func (p *docPackage) problems(dir string) []string {
	var out []string
	for _, b := range p.bad {
		out = append(out, fmt.Sprintf("%s: a package doc comment must start %q: %s", dir, wantStart(p.name), b))
	}
	switch {
	case len(p.docs) == 0 && len(p.bad) == 0:
		out = append(out, fmt.Sprintf("%s: package %s has no doc comment: add %q to one file", dir, p.name, "// "+wantStart(p.name)+" ..."))
	case len(p.docs)+len(p.bad) > 1:
		out = append(out, fmt.Sprintf("%s: package %s has a doc comment in %d files; it needs one: %v", dir, p.name, len(p.docs)+len(p.bad), append(p.docs, p.bad...)))
	case p.docGo && len(p.docs) == 1 && filepath.Base(p.docs[0]) != "doc.go":
		out = append(out, fmt.Sprintf("%s: package %s has a doc.go, but its doc comment is in %s", dir, p.name, p.docs[0]))
	}
	return out
}

// readPackages parses the package clause of every file PackageDocProblems
// reads, by directory relative to root.
func readPackages(root string) (map[string]*docPackage, []string, error) {
	pkgs := map[string]*docPackage{}
	var problems []string
	err := walkSources(root, func(path string) error {
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
			p = &docPackage{name: f.Name.Name}
			pkgs[dir] = p
		}
		if p.name != f.Name.Name {
			problems = append(problems, fmt.Sprintf("%s: package %s, but %s is package %s", rel, f.Name.Name, dir, p.name))
		}
		p.docGo = p.docGo || filepath.Base(path) == "doc.go"
		if f.Doc == nil {
			return nil
		}
		if text := f.Doc.Text(); docNamesPackage(text, f.Name.Name) {
			p.docs = append(p.docs, rel)
		} else {
			first, _, _ := strings.Cut(text, "\n")
			p.bad = append(p.bad, rel+": "+first)
		}
		return nil
	})
	return pkgs, problems, err
}

// skipDir says whether the walk leaves out the folder at path: other
// modules, and folders that hold no package of the module.
func skipDir(root, path, name string) error {
	if path == root {
		return nil
	}
	switch {
	case name == "testdata", name == "bin", name == "vendor", name == "node_modules",
		strings.HasPrefix(name, "."), strings.HasPrefix(name, "_"):
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
		return filepath.SkipDir // another module
	}
	return nil
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

// ModuleRoot walks up from the working directory (a test's is its
// package's folder) to the nearest folder with a go.mod.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("working directory: %v", err)
	}
	for {
		_, err := os.Stat(filepath.Join(dir, "go.mod"))
		if err == nil {
			return dir
		}
		if !errors.Is(err, fs.ErrNotExist) {
			tb.Fatalf("stat go.mod in %s: %v", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatalf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// walkSources calls fn with the path of every non-test Go file of the
// module rooted at root, skipping what skipDir skips and files whose
// names start with "." or "_".
func walkSources(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipDir(root, path, d.Name())
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		return fn(path)
	})
}
