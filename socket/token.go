package socket

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpmux/mcpmux/internal/statefile"
)

// tokenBytes is the entropy of a generated token, written as hex.
const tokenBytes = 32

// LoadOrCreateToken returns the token kept in the file at path. When there
// is no file yet it generates one (32 random bytes, hex) and writes it there
// with mode 0600, creating the folder with mode 0700; created reports that.
// The folder and the file follow package statefile's rules: a folder of
// ours open to others is made private, another user's is refused, and a
// file that is a link, another user's or writable by others is refused
// (statefile.ErrUnsafe).
// The file appears whole or not at all, so that two daemons started together
// agree on one token. A file that others than its owner may read, that is
// not a regular file, or that holds no token is an error.
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	// The folder first: a token in a folder others may write is no token.
	dir := filepath.Dir(path)
	if _, err := statefile.PrepareDir(dir); err != nil {
		return "", false, fmt.Errorf("the folder of the token file: %w", err)
	}
	token, err = readToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	token = newToken()
	// Written under a temporary name, then linked into place: link fails
	// when the path exists, so a token another daemon wrote meanwhile wins.
	tmp, err := writeTemp(dir, token)
	if err != nil {
		return "", false, err
	}
	defer os.Remove(tmp)
	switch err := os.Link(tmp, path); {
	case errors.Is(err, fs.ErrExist):
		token, err = readToken(path)
		return token, false, err
	case err != nil:
		return "", false, fmt.Errorf("write the token file: %w", err)
	}
	return token, true, nil
}

// readToken reads a token file, refusing one whose mode lets others read
// it; one that is a symlink, not this user's or writable by others is
// refused by package statefile's rules (statefile.ErrUnsafe).
func readToken(path string) (string, error) {
	f, fi, err := statefile.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("read the token file: %w", err)
	}
	defer f.Close()
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %#o: others may read it; chmod 600 it (or delete it for a new token)", path, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return "", fmt.Errorf("read the token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("token file %s does not hold a token (one line of text); delete it for a new one", path)
	}
	return token, nil
}

// RotateToken replaces the token kept in the file at path with a new one
// (32 random bytes, hex), in one step: a reader sees the old token or the
// new one, never a part. It creates the file (and its folder, 0700) when
// there is none, and returns the new token.
func RotateToken(path string) (string, error) {
	dir := filepath.Dir(path)
	if _, err := statefile.PrepareDir(dir); err != nil {
		return "", fmt.Errorf("the folder of the token file: %w", err)
	}
	token := newToken()
	tmp, err := writeTemp(dir, token)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp) // gone already once renamed
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("replace the token file: %w", err)
	}
	return token, nil
}

// newToken is tokenBytes random bytes in hex.
func newToken() string {
	b := make([]byte, tokenBytes)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// writeTemp writes token and a newline to a new file of mode 0600 in dir,
// synced, and returns its path.
func writeTemp(dir, token string) (string, error) {
	tmp, err := os.CreateTemp(dir, ".http.token.*") // mode 0600
	if err != nil {
		return "", fmt.Errorf("write the token file: %w", err)
	}
	_, err = tmp.WriteString(token + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write the token file: %w", err)
	}
	return tmp.Name(), nil
}

// TokenPath is where the generated web token is kept:
// $XDG_STATE_HOME/mcpmux/http.token, else ~/.local/state/mcpmux/http.token.
// As the XDG spec asks, a relative XDG_STATE_HOME is ignored.
func TokenPath(environ []string) (string, error) {
	getenv := func(key string) string {
		for _, kv := range slices.Backward(environ) {
			if k, v, ok := strings.Cut(kv, "="); ok && k == key {
				return v
			}
		}
		return ""
	}
	if state := getenv("XDG_STATE_HOME"); filepath.IsAbs(state) {
		return filepath.Join(state, "mcpmux", "http.token"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("cannot place the web token: neither XDG_STATE_HOME nor HOME is set to an absolute path; set http_token")
	}
	return filepath.Join(home, ".local", "state", "mcpmux", "http.token"), nil
}

// ServeToken is LoadOrCreateToken for the daemon. A token file refused as
// unsafe (a link, another user's file, one others may write) is no token
// to serve with: its folder being the daemon's own, it is removed and a new
// token made, and refused says why.
func ServeToken(path string) (token string, created bool, refused, err error) {
	token, created, err = LoadOrCreateToken(path)
	if !errors.Is(err, statefile.ErrUnsafe) {
		return token, created, nil, err
	}
	refused = err
	if rerr := os.Remove(path); rerr != nil {
		return "", false, refused, fmt.Errorf("%w (and cannot remove it: %v)", err, rerr)
	}
	token, created, err = LoadOrCreateToken(path)
	return token, created, refused, err
}
