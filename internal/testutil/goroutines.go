package testutil

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// CheckGoroutineDocs fails t for each place in the package in dir that
// starts a goroutine or a timer whose enclosing function is not named in the
// "Goroutines" section of the package's doc comment: see
// GoroutineDocProblems. A test in the package's folder passes ".".
func CheckGoroutineDocs(t testing.TB, dir string) {
	t.Helper()
	problems, n, err := GoroutineDocProblems(dir)
	if err != nil {
		t.Fatalf("goroutine docs of %s: %v", dir, err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d places that start a goroutine or a timer checked in %s", n, dir)
}

// GoroutineDocProblems parses the non-test Go files of the package in dir
// and finds every place that starts a goroutine or a timer: a go statement,
// a call of a method named Go (sync.WaitGroup.Go, errgroup.Group.Go), and a
// call of time.AfterFunc or context.AfterFunc. For each it names the
// function that contains it (for a method, Type.Method; for a function
// literal, the named function around it) and returns a problem, one line
// each, when that name is not in the "# Goroutines" section of the
// package's doc comment (from the heading to the next heading), and one
// for each Type.member the section names where the package has Type but
// not that field or method (a name left behind by a rename). It also
// returns how many places it found.
//
// The section is where a reader learns what runs concurrently in the
// package and who waits for it; this check keeps the list from missing
// what the code starts.
func GoroutineDocProblems(dir string) (problems []string, places int, err error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var section string
	var sites []goSite
	members := map[string]map[string]bool{} // the package's types, with their fields and methods
	haveDoc := false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, 0, err
		}
		if ignored(f.Comments) {
			continue
		}
		if f.Doc != nil && docNamesPackage(f.Doc.Text(), f.Name.Name) {
			haveDoc = true
			section = goroutinesSection(f.Doc.Text())
		}
		sites = append(sites, goSites(fset, f)...)
		addMembers(members, f)
	}
	switch {
	case !haveDoc:
		return []string{fmt.Sprintf("%s: the package has no doc comment", dir)}, len(sites), nil
	case section == "" && len(sites) > 0:
		return []string{fmt.Sprintf("%s: the package doc has no %q section to name where goroutines and timers start (%d places)", dir, "# Goroutines", len(sites))}, len(sites), nil
	}
	for _, s := range sites {
		if !mentions(section, s.fn) {
			problems = append(problems, fmt.Sprintf("%s: %s in %s: add %s to the Goroutines section of the package doc (what it runs, who waits for it)", s.pos, s.what, s.fn, s.fn))
		}
	}
	for _, m := range qualified.FindAllStringSubmatch(section, -1) {
		if ms, ok := members[m[1]]; ok && !ms[m[2]] && !ms["*"] {
			problems = append(problems, fmt.Sprintf("%s: the Goroutines section of the package doc names %s, which the package does not have", dir, m[0]))
		}
	}
	return problems, len(sites), nil
}

// qualified matches Type.member in doc text.
var qualified = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\b`)

// addMembers adds f's types to members, with their fields and methods.
func addMembers(members map[string]map[string]bool, f *ast.File) {
	add := func(t, m string) {
		if members[t] == nil {
			members[t] = map[string]bool{}
		}
		if m != "" {
			members[t][m] = true
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil && len(d.Recv.List) > 0 {
				add(recvType(d.Recv.List[0].Type), d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok {
					continue
				}
				add(ts.Name.Name, "")
				var fields *ast.FieldList
				switch t := ts.Type.(type) {
				case *ast.StructType:
					fields = t.Fields
				case *ast.InterfaceType:
					fields = t.Methods
				default:
					add(ts.Name.Name, "*") // a named type of another: its methods are not known here
					continue
				}
				for _, fl := range fields.List {
					for _, n := range fl.Names {
						add(ts.Name.Name, n.Name)
					}
					if len(fl.Names) == 0 {
						add(ts.Name.Name, "*") // embedded: what it brings is not known here
					}
				}
			}
		}
	}
}

// goSite is one place that starts a goroutine or a timer.
type goSite struct {
	pos  token.Position
	what string // "go statement", "x.Go call", "time.AfterFunc call"
	fn   string // the named function around it: F or Type.Method
}

// goSites lists the places in f that start a goroutine or a timer.
func goSites(fset *token.FileSet, f *ast.File) []goSite {
	var sites []goSite
	for _, decl := range f.Decls {
		fn := declName(decl)
		ast.Inspect(decl, func(n ast.Node) bool {
			var what string
			switch n := n.(type) {
			case *ast.GoStmt:
				what = "go statement"
			case *ast.CallExpr:
				what = startCall(n)
			}
			if what != "" {
				p := fset.Position(n.Pos())
				p.Filename = filepath.Base(p.Filename)
				sites = append(sites, goSite{pos: p, what: what, fn: fn})
			}
			return true
		})
	}
	return sites
}

// startCall says what a call that starts a goroutine or a timer is, or ""
// for any other call.
func startCall(c *ast.CallExpr) string {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if sel.Sel.Name == "Go" {
		return exprString(sel.X) + ".Go call"
	}
	if x, ok := sel.X.(*ast.Ident); ok && sel.Sel.Name == "AfterFunc" && (x.Name == "time" || x.Name == "context") {
		return x.Name + ".AfterFunc call"
	}
	return ""
}

// exprString renders the receiver of a call briefly, for the message.
func exprString(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	}
	return "(...)"
}

// declName names a top-level declaration: F, Type.Method, or the first
// name a var declaration declares.
func declName(d ast.Decl) string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || len(d.Recv.List) == 0 {
			return d.Name.Name
		}
		return recvType(d.Recv.List[0].Type) + "." + d.Name.Name
	case *ast.GenDecl:
		for _, s := range d.Specs {
			if v, ok := s.(*ast.ValueSpec); ok && len(v.Names) > 0 {
				return v.Names[0].Name
			}
		}
	}
	return "?"
}

// recvType names a receiver's type without its pointer or type parameters.
func recvType(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.StarExpr:
		return recvType(x.X)
	case *ast.IndexExpr:
		return recvType(x.X)
	case *ast.IndexListExpr:
		return recvType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}

// goroutinesSection returns the text of a doc comment's "# Goroutines"
// section, or "" when it has none.
func goroutinesSection(doc string) string {
	lines := strings.Split(doc, "\n")
	start := slices.Index(lines, "# Goroutines")
	if start < 0 {
		return ""
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "# ") {
			end = i
			break
		}
	}
	return strings.Join(lines[start+1:end], "\n")
}

// mentions says whether text names name as a whole word: not as part of a
// longer identifier ("Run" is not in "RunAll"), though a qualifier before it
// is allowed ("Session.Run" is in "session.Session.Run").
func mentions(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		before := j == 0 || !isIdent(rune(text[j-1]))
		after := end == len(text) || !isIdent(rune(text[end]))
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isIdent(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }
