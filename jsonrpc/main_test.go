package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
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
			assert.True(t, strings.HasPrefix(f.Doc.Text(), "Package jsonrpc "), "doc in %s: %q", name, f.Doc.Text())
		}
	}
	assert.Equal(t, []string{"doc.go"}, docs)
}

// integerID is the JSON grammar of an integer: MCP ids are strings or these.
var integerID = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// isValidID is the tests' own reading of the id rule, independent of the
// package's: a JSON string, or a JSON number without fraction or exponent,
// with nothing around it.
func isValidID(v []byte) bool {
	if len(v) == 0 || !json.Valid(v) || len(bytes.TrimSpace(v)) != len(v) {
		return false
	}
	if v[0] == '"' {
		var s string
		return json.Unmarshal(v, &s) == nil
	}
	return integerID.Match(v)
}

// raw is shorthand for a json.RawMessage in tables.
func raw(s string) json.RawMessage { return json.RawMessage(s) }
