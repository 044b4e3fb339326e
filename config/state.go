package config

import (
	"errors"
	"os"
	"path/filepath"
)

// StateDir is the state folder, where an auto-started daemon logs and
// where mcpmux keeps what it learns: $XDG_STATE_HOME/mcpmux when
// XDG_STATE_HOME is set to an absolute path, else .local/state/mcpmux in
// the account's home folder (Home: the account's before $HOME). The
// clients that start `mcpmux connect` often strip the environment, so the
// fallback must not hang on what they strip.
func StateDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "mcpmux"), nil
	}
	home := Home(os.Getuid())
	if !filepath.IsAbs(home) {
		return "", errors.New("no state folder: the account has no home folder and neither XDG_STATE_HOME nor HOME is set")
	}
	return filepath.Join(home, ".local", "state", "mcpmux"), nil
}
