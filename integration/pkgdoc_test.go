package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestPackageDocs is the package-doc check of the integration module, which
// the main module's check (in internal/testutil) leaves out: every package
// here says what it owns, in one doc comment.
func TestPackageDocs(t *testing.T) {
	root := testutil.ModuleRoot(t)
	_, err := os.Stat(filepath.Join(root, "benchkit"))
	require.NoError(t, err, "%s is the integration module's root", root)
	testutil.CheckPackageDocs(t, root)
}
