package mux

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryUnlockIsDeferred reads the package's own source: a lock released
// by a plain call is released only if nothing between Lock and Unlock
// panics, and a panic recovered at the session boundary would leave it held
// for every other session of the server. So every Unlock in mux is deferred.
func TestEveryUnlockIsDeferred(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var plain []string
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		deferred := map[*ast.CallExpr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if d, ok := n.(*ast.DeferStmt); ok {
				deferred[d.Call] = true
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Unlock" && sel.Sel.Name != "RUnlock") {
				return true
			}
			checked++
			if !deferred[call] {
				plain = append(plain, fset.Position(call.Pos()).String())
			}
			return true
		})
	}
	assert.Greater(t, checked, 20, "the check found the package's unlocks")
	assert.Empty(t, plain, "unlocks that are not deferred")
}
