package outbox_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestPackageDoc checks that exactly one file carries the package doc and
// that it says what the package is.
func TestPackageDoc(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var docs []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.PackageClauseOnly|parser.ParseComments)
		require.NoError(t, err, "parse %s", name)
		if f.Doc != nil {
			docs = append(docs, name)
			assert.True(t, strings.HasPrefix(f.Doc.Text(), "Package outbox "), "doc in %s: %q", name, f.Doc.Text())
		}
	}
	assert.Equal(t, []string{"doc.go"}, docs)
}
