package shell_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/internal/shell"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestJoin checks which words are quoted, and how.
func TestJoin(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"systemctl", "--user", "enable", "--now", "mcpmux"}, "systemctl --user enable --now mcpmux"},
		{[]string{"/opt/my apps/mcpmux", "connect", "a"}, "'/opt/my apps/mcpmux' connect a"},
		{[]string{"it's", ""}, `'it'\''s' ''`},
		{[]string{"a@b%c+d=e:f,g./h_i-j"}, "a@b%c+d=e:f,g./h_i-j"},
		{[]string{"$HOME", "a;b"}, "'$HOME' 'a;b'"},
	} {
		assert.Equal(t, tt.want, shell.Join(tt.args), "Join(%q)", tt.args)
	}
}
