package testutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// LockRules are what a package's lock check is told.
type LockRules struct {
	// Allowed are calls made under a lock that the check would report but
	// the package knows to be harmless, each with why: a function value
	// ("s.hook"), an interface method ("(log/slog.Handler).Handle"), a
	// function of the module that takes a lock ("Projects.startLocked"),
	// or one that may block ("(*net.Buffers).WriteTo").
	Allowed map[string]string
	// Order are the nestings the package documents, each as the owners of
	// the two locks, outer first: {"mux.flights", "idmap.Table"}. A lock's
	// owner is the named type of the struct that holds the mutex (or
	// embeds it), with its package's name.
	Order [][2]string
	// CallUnderLock are functions of the module, by types.Func.FullName,
	// that call the function passed to them while they hold their own
	// lock: every function literal the package passes to one must take no
	// lock.
	CallUnderLock []string
}

// CheckLocks fails t with every place in the package at dir that breaks
// rules, and if the check found fewer than atLeast functions that lock
// (a check that finds nothing proves nothing).
func CheckLocks(t testing.TB, dir string, rules LockRules, atLeast int) {
	t.Helper()
	problems, n, err := LockProblems(dir, rules)
	if err != nil {
		t.Fatal(err)
	}
	if n < atLeast {
		t.Errorf("the check found %d functions that lock, want at least %d", n, atLeast)
	}
	if len(problems) > 0 {
		t.Errorf("what breaks the rule:\n%s", strings.Join(problems, "\n"))
	}
}

// LockProblems reads the package in dir, and every package of its module
// that it imports, with their types, and checks each function of the
// package that takes a lock (sync.Mutex or sync.RWMutex) from there to its
// end, where its deferred unlock runs. It returns one problem for each of
// these done there, and how many functions it checked:
//   - another lock taken, directly or by a function of the module that the
//     call leads to, unless rules.Order names the nesting;
//   - a call that may block or write: a function of os, net, io, bufio,
//     os/exec, net/http or log/slog, a method of such a package's type, or
//     a wait group's Wait;
//   - a channel send or receive, or a select, that can block (one with a
//     default case cannot);
//   - a call through an interface or a function value whose target the
//     check cannot see (a context's methods and cancel functions, error's
//     Error and fmt.Stringer's String excepted).
//
// Calls in rules.Allowed are not reported. Every unlock in the package must
// be deferred (else a panic recovered further up would leave the lock
// held), and a function literal it passes to one of rules.CallUnderLock
// must take no lock. Function literals count where they run: one called in
// place as part of the function, any other as a function of its own.
func LockProblems(dir string, rules LockRules) (problems []string, functions int, err error) {
	l, err := loadModule(dir)
	if err != nil {
		return nil, 0, err
	}
	target := l.pkgs[l.target]
	for _, b := range target.bodies {
		problems = append(problems, l.unlocks(b)...)
		problems = append(problems, l.underLock(b, rules.CallUnderLock)...)
		if l.direct(b).lock == token.NoPos {
			continue
		}
		functions++
		problems = append(problems, l.check(b, rules)...)
	}
	return problems, functions, nil
}

// body is one function's body: a declared function's or a literal's.
type body struct {
	name string // the declared function, and "func literal" for one inside it
	fn   *types.Func
	node ast.Node // *ast.FuncDecl or *ast.FuncLit
	pkg  *lockPkg
}

func (b *body) block() *ast.BlockStmt {
	switch n := b.node.(type) {
	case *ast.FuncDecl:
		return n.Body
	case *ast.FuncLit:
		return n.Body
	}
	return nil
}

type lockPkg struct {
	path   string
	info   *types.Info
	bodies []*body
}

// lockLoader holds the module's packages that the target imports.
type lockLoader struct {
	fset   *token.FileSet
	target string
	pkgs   map[string]*lockPkg
	decls  map[string]*body // declared functions of the module, by types.Func.FullName
	lits   map[*ast.FuncLit]*body
	vars   map[types.Object]*body // local variables set once to a function literal (x := func...)
	acq    map[*body]int          // 0 unknown, 1 being computed, 2 known (in taken)
	taken  map[*body]map[string]string
	facts  map[*body]directFacts
}

// directFacts are what a body does itself, not counting literals inside it
// that run elsewhere.
type directFacts struct {
	lock  token.Pos // the first lock it takes, or NoPos
	owner string    // whose lock that is: see lockOwner
}

type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	Standard   bool
	Module     *struct{ Main bool }
}

func loadModule(dir string) (*lockLoader, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Standard,Module", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var all []listed
	for d := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := d.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		all = append(all, p)
	}
	if len(all) == 0 {
		return nil, errors.New("go list listed nothing")
	}
	exports := map[string]string{}
	for _, p := range all {
		exports[p.ImportPath] = p.Export
	}
	l := &lockLoader{
		fset: token.NewFileSet(), target: all[len(all)-1].ImportPath, pkgs: map[string]*lockPkg{},
		decls: map[string]*body{}, lits: map[*ast.FuncLit]*body{}, vars: map[types.Object]*body{}, acq: map[*body]int{}, taken: map[*body]map[string]string{}, facts: map[*body]directFacts{},
	}
	imp := importer.ForCompiler(l.fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	for _, p := range all {
		if p.Standard || p.Module == nil || !p.Module.Main {
			continue
		}
		if err := l.loadPackage(p, imp); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *lockLoader) loadPackage(p listed, imp types.Importer) error {
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(l.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	info := &types.Info{
		Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{}, Types: map[ast.Expr]types.TypeAndValue{},
	}
	if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, l.fset, files, info); err != nil {
		return fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	lp := &lockPkg{path: p.ImportPath, info: info}
	l.pkgs[p.ImportPath] = lp
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn, _ := info.Defs[fd.Name].(*types.Func)
			b := &body{name: declName(fd), fn: fn, node: fd, pkg: lp}
			lp.bodies = append(lp.bodies, b)
			if fn != nil {
				l.decls[fn.FullName()] = b
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if lit, ok := n.(*ast.FuncLit); ok {
					lb := &body{name: b.name + " (func literal)", node: lit, pkg: lp}
					lp.bodies = append(lp.bodies, lb)
					l.lits[lit] = lb
				}
				return true
			})
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok && as.Tok == token.DEFINE && len(as.Lhs) == len(as.Rhs) {
					for i, lhs := range as.Lhs {
						id, _ := lhs.(*ast.Ident)
						lit, _ := as.Rhs[i].(*ast.FuncLit)
						if id != nil && lit != nil && info.Defs[id] != nil {
							l.vars[info.Defs[id]] = l.lits[lit]
						}
					}
				}
				return true
			})
		}
	}
	return nil
}

// visit calls fn for each node that runs as part of b: it does not go into
// function literals, except those called in place.
func visit(b *body, fn func(n ast.Node) bool) {
	var walk func(n ast.Node) bool
	walk = func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok && lit != b.node {
			return false
		}
		if c, ok := n.(*ast.CallExpr); ok {
			if lit, ok := c.Fun.(*ast.FuncLit); ok {
				if !fn(n) {
					return false
				}
				ast.Inspect(lit.Body, walk)
				for _, a := range c.Args {
					ast.Inspect(a, walk)
				}
				return false
			}
		}
		return fn(n)
	}
	ast.Inspect(b.block(), walk)
}

// syncMethod names the sync method a call makes ("Mutex.Lock"), or "".
func syncMethod(info *types.Info, c *ast.CallExpr) string {
	fn := callee(info, c)
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != "sync" {
		return ""
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return ""
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name() + "." + fn.Name()
	}
	return ""
}

func isLock(m string) bool {
	return m == "Mutex.Lock" || m == "RWMutex.Lock" || m == "RWMutex.RLock"
}

func isUnlock(m string) bool {
	return m == "Mutex.Unlock" || m == "RWMutex.Unlock" || m == "RWMutex.RUnlock"
}

// callee is the function or method a call names statically, or nil.
func callee(info *types.Info, c *ast.CallExpr) *types.Func {
	switch f := ast.Unparen(c.Fun).(type) {
	case *ast.Ident:
		fn, _ := info.Uses[f].(*types.Func)
		return fn
	case *ast.SelectorExpr:
		if sel := info.Selections[f]; sel != nil {
			fn, _ := sel.Obj().(*types.Func)
			return fn
		}
		fn, _ := info.Uses[f.Sel].(*types.Func) // a package's function
		return fn
	case *ast.IndexExpr: // a generic function, instantiated
		return callee(info, &ast.CallExpr{Fun: f.X})
	}
	return nil
}

func (l *lockLoader) direct(b *body) directFacts {
	if f, ok := l.facts[b]; ok {
		return f
	}
	var f directFacts
	visit(b, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && f.lock == token.NoPos && isLock(syncMethod(b.pkg.info, c)) {
			f.lock, f.owner = c.Pos(), lockOwner(b.pkg.info, c)
		}
		return true
	})
	l.facts[b] = f
	return f
}

// lockOwner names whose lock a Lock call takes: the named type of the
// struct whose mutex field it is, or that embeds it ("mux.flights"), or a
// variable's package and name.
func lockOwner(info *types.Info, c *ast.CallExpr) string {
	sel, ok := ast.Unparen(c.Fun).(*ast.SelectorExpr)
	if !ok {
		return "?"
	}
	x := ast.Unparen(sel.X)
	if isMutex(info.TypeOf(x)) {
		switch x := x.(type) {
		case *ast.SelectorExpr:
			if v, ok := info.Uses[x.Sel].(*types.Var); ok && !v.IsField() && v.Pkg() != nil {
				return v.Pkg().Name() + "." + v.Name() // another package's variable: syscall.ForkLock
			}
			return typeName(info.TypeOf(x.X))
		case *ast.Ident:
			if o := info.Uses[x]; o != nil && o.Pkg() != nil {
				return o.Pkg().Name() + "." + o.Name()
			}
		}
		return types.ExprString(x)
	}
	return typeName(info.TypeOf(x))
}

func isMutex(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "sync" && (n.Obj().Name() == "Mutex" || n.Obj().Name() == "RWMutex")
}

func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
		return n.Obj().Pkg().Name() + "." + n.Obj().Name()
	}
	return types.TypeString(t, nil)
}

// locks are the locks running b may take, itself or in the module's
// functions it calls, by owner, each with how ("locks at idmap.go:53",
// "calls T.Get at a.go:46, which locks at b.go:7").
func (l *lockLoader) locks(b *body) map[string]string {
	if l.acq[b] == 1 {
		return nil // a cycle: the path that began it collects the rest
	}
	if l.acq[b] == 2 {
		return l.taken[b]
	}
	l.acq[b] = 1
	got := map[string]string{}
	if f := l.direct(b); f.lock != token.NoPos {
		got[f.owner] = "locks at " + l.where(f.lock)
	}
	spawned := map[*ast.CallExpr]bool{} // a go statement's call runs on a goroutine of its own
	visit(b, func(n ast.Node) bool {
		if g, ok := n.(*ast.GoStmt); ok {
			spawned[g.Call] = true
		}
		if c, ok := n.(*ast.CallExpr); ok && !spawned[c] {
			if cb := l.calleeBody(b, c); cb != nil {
				for owner, how := range l.locks(cb) {
					if got[owner] == "" {
						got[owner] = "calls " + cb.name + " at " + l.where(c.Pos()) + ", which " + how
					}
				}
			}
		}
		return true
	})
	l.acq[b] = 2
	l.taken[b] = got
	return got
}

// firstLock is one of the locks in got that order does not let the holder
// of held's lock take, with how it is taken; "" when there is none.
func firstLock(got map[string]string, held string, order [][2]string) (string, string) {
	owners := make([]string, 0, len(got))
	for o := range got {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	for _, o := range owners {
		if !slices.Contains(order, [2]string{held, o}) {
			return o, got[o]
		}
	}
	return "", ""
}

// calleeBody is the body of the module's function that c calls, or nil.
func (l *lockLoader) calleeBody(b *body, c *ast.CallExpr) *body {
	if lit, ok := c.Fun.(*ast.FuncLit); ok {
		return l.lits[lit]
	}
	if id, ok := ast.Unparen(c.Fun).(*ast.Ident); ok {
		if vb := l.vars[b.pkg.info.Uses[id]]; vb != nil {
			return vb
		}
	}
	fn := callee(b.pkg.info, c)
	if fn == nil {
		return nil
	}
	return l.decls[fn.Origin().FullName()]
}

// funcArg is the body of a function literal passed as a, itself or by a
// local variable set to it, or nil.
func (l *lockLoader) funcArg(b *body, a ast.Expr) *body {
	switch a := ast.Unparen(a).(type) {
	case *ast.FuncLit:
		return l.lits[a]
	case *ast.Ident:
		return l.vars[b.pkg.info.Uses[a]]
	}
	return nil
}

// at is pos as file:line:column, for a problem.
func (l *lockLoader) at(pos token.Pos) string {
	p := l.fset.Position(pos)
	p.Filename = filepath.Base(p.Filename)
	return p.String()
}

// where is pos as file:line, for the path to a lock.
func (l *lockLoader) where(pos token.Pos) string {
	p := l.fset.Position(pos)
	return fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)
}

// blocking packages: a call into them under a lock may block or write.
var blockingPkgs = []string{"os", "net", "io", "bufio", "log/slog", "os/exec", "net/http"}

func (l *lockLoader) check(b *body, rules LockRules) []string {
	first := l.direct(b)
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: in %s, under the lock taken at line %d: %s", l.at(n.Pos()), b.name, l.fset.Position(first.lock).Line, fmt.Sprintf(format, args...)))
	}
	deferred := map[*ast.CallExpr]bool{}
	spawned := map[*ast.CallExpr]bool{} // a go statement's call runs under no lock of ours
	nonBlocking := map[ast.Node]bool{}  // the comm statements of selects with a default
	visit(b, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			spawned[n.Call] = true
		case *ast.DeferStmt:
			deferred[n.Call] = true
		case *ast.SelectStmt:
			hasDefault := slices.ContainsFunc(n.Body.List, func(s ast.Stmt) bool { return s.(*ast.CommClause).Comm == nil })
			if hasDefault {
				nonBlocking[n] = true
				for _, s := range n.Body.List {
					if comm := s.(*ast.CommClause).Comm; comm != nil {
						ast.Inspect(comm, func(m ast.Node) bool { nonBlocking[m] = true; return true })
					}
				}
			}
		}
		return true
	})
	visit(b, func(n ast.Node) bool {
		if n == nil || n.Pos() <= first.lock || nonBlocking[n] {
			return true
		}
		switch n := n.(type) {
		case *ast.SendStmt:
			report(n, "a channel send that can block")
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				report(n, "a channel receive that can block")
			}
		case *ast.SelectStmt:
			report(n, "a select that can block")
		case *ast.CallExpr:
			if !spawned[n] {
				l.checkCall(b, n, first.owner, rules, report)
			}
		}
		return true
	})
	return out
}

// underLock reports each function literal b passes to one of funcs that
// takes a lock.
func (l *lockLoader) underLock(b *body, funcs []string) []string {
	var out []string
	visit(b, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := callee(b.pkg.info, c)
		if fn == nil || !slices.Contains(funcs, fn.Origin().FullName()) {
			return true
		}
		for _, a := range c.Args {
			ab := l.funcArg(b, a)
			if ab == nil {
				continue
			}
			if owner, how := firstLock(l.locks(ab), "", nil); owner != "" {
				out = append(out, fmt.Sprintf("%s: in %s: the function passed to %s, which calls it under its lock, takes %s's lock: it %s",
					l.at(a.Pos()), b.name, fn.Name(), owner, how))
			}
		}
		return true
	})
	return out
}

// unlocks reports each unlock in b that is not deferred.
func (l *lockLoader) unlocks(b *body) []string {
	deferred := map[*ast.CallExpr]bool{}
	var out []string
	visit(b, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.DeferStmt:
			deferred[n.Call] = true
		case *ast.CallExpr:
			if isUnlock(syncMethod(b.pkg.info, n)) && !deferred[n] {
				out = append(out, fmt.Sprintf("%s: in %s: an unlock that is not deferred", l.at(n.Pos()), b.name))
			}
		}
		return true
	})
	return out
}

func (l *lockLoader) checkCall(b *body, c *ast.CallExpr, held string, rules LockRules, report func(ast.Node, string, ...any)) {
	info := b.pkg.info
	m := syncMethod(info, c)
	switch {
	case isUnlock(m):
		return
	case isLock(m):
		if owner := lockOwner(info, c); !slices.Contains(rules.Order, [2]string{held, owner}) {
			report(c, "a second lock (%s's)", owner)
		}
		return
	case m == "WaitGroup.Wait":
		report(c, "a wait group's Wait")
		return
	}
	if _, ok := c.Fun.(*ast.FuncLit); ok {
		return // its body is visited as part of this one
	}
	if tv, ok := info.Types[c.Fun]; ok && tv.IsType() {
		return // a conversion
	}
	if id, ok := ast.Unparen(c.Fun).(*ast.Ident); ok {
		if _, ok := info.Uses[id].(*types.Builtin); ok {
			return
		}
	}
	if vb := l.calleeBody(b, c); vb != nil && callee(info, c) == nil {
		if owner, how := firstLock(l.locks(vb), held, rules.Order); owner != "" && rules.Allowed[vb.name] == "" {
			report(c, "a call of %s, which takes %s's lock: it %s", vb.name, owner, how)
		}
		return
	}
	fn := callee(info, c)
	if fn == nil {
		name := types.ExprString(c.Fun)
		if rules.Allowed[name] == "" && !isCancel(info.TypeOf(c.Fun)) {
			report(c, "a call of the function value %s, whose target the check cannot see", name)
		}
		return
	}
	if cb := l.decls[fn.Origin().FullName()]; cb != nil {
		if owner, how := firstLock(l.locks(cb), held, rules.Order); owner != "" && rules.Allowed[cb.name] == "" {
			report(c, "a call of %s, which takes %s's lock: it %s", cb.name, owner, how)
		}
		return
	}
	if recv := fn.Signature().Recv(); recv != nil && types.IsInterface(recv.Type()) {
		name := fn.FullName()
		if rules.Allowed[name] == "" && !lockFree(fn) {
			report(c, "a call of the interface method %s, whose target the check cannot see", name)
		}
		return
	}
	if fn.Pkg() != nil && slices.Contains(blockingPkgs, fn.Pkg().Path()) && rules.Allowed[fn.FullName()] == "" {
		report(c, "a call of %s, which may block or write", fn.FullName())
	}
}

// isCancel reports a context's cancel function: calling one never blocks.
func isCancel(t types.Type) bool {
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != "context" {
		return false
	}
	return n.Obj().Name() == "CancelFunc" || n.Obj().Name() == "CancelCauseFunc"
}

// lockFree reports interface methods that do not block or take a lock of
// the module: error's and fmt.Stringer's, and a context's.
func lockFree(fn *types.Func) bool {
	switch fn.FullName() {
	case "(error).Error", "(fmt.Stringer).String",
		"(context.Context).Err", "(context.Context).Done", "(context.Context).Value", "(context.Context).Deadline":
		return true
	}
	return false
}
