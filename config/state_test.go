package config_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
)

// TestStateDir: XDG_STATE_HOME when set to an absolute path; otherwise the
// account's home folder, whatever $HOME says, so that a connect started
// with a stripped or different environment finds the daemon's records.
func TestStateDir(t *testing.T) {
	u, err := user.LookupId(strconv.Itoa(os.Getuid()))
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(u.HomeDir), "the account has a home folder")
	account := filepath.Join(u.HomeDir, ".local", "state", "mcpmux")
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG_STATE_HOME set", map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/h"}, "/x/state/mcpmux"},
		{"a relative XDG_STATE_HOME is ignored", map[string]string{"XDG_STATE_HOME": "state", "HOME": "/h"}, account},
		{"another HOME", map[string]string{"HOME": "/somewhere/else"}, account},
		{"no variables at all", map[string]string{}, account},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.StateDir(func(k string) string { return tt.env[k] })
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "env %v", tt.env)
		})
	}
}
