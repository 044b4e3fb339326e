package testutil

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
)

// UndeferredUnlocks reads every non-test Go file of the module rooted at
// root (skipping what PackageDocProblems skips) and returns, one line each,
// the calls of a method named Unlock or RUnlock that are not deferred, and
// how many such calls it found in all. A lock released by a plain call is
// released only if nothing between Lock and Unlock panics; a panic
// recovered further up would leave it held.
func UndeferredUnlocks(root string) (problems []string, unlocks int, err error) {
	err = walkSources(root, func(path string) error {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		if ignored(f.Comments) {
			return nil
		}
		deferred := map[*ast.CallExpr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if d, ok := n.(*ast.DeferStmt); ok {
				deferred[d.Call] = true
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Unlock" && sel.Sel.Name != "RUnlock") {
				return true
			}
			unlocks++
			if !deferred[c] {
				p := fset.Position(c.Pos())
				rel, _ := filepath.Rel(root, p.Filename)
				problems = append(problems, fmt.Sprintf("%s:%d: %s is not deferred", rel, p.Line, unlockCall(sel)))
			}
			return true
		})
		return nil
	})
	return problems, unlocks, err
}

func unlockCall(sel *ast.SelectorExpr) string { return exprString(sel.X) + "." + sel.Sel.Name + "()" }
