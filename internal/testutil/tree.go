package testutil

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// WriteTree writes files (slash-separated paths under root, and their
// texts) with their folders, owner-only, as a home folder's files are.
func WriteTree(tb testing.TB, root string, files map[string]string) {
	tb.Helper()
	for p, text := range files {
		path := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// HashTree hashes every file under dir with its path, so that two hashes
// differ when a file was written, added or removed between them.
func HashTree(tb testing.TB, dir string) [32]byte {
	tb.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		h.Write([]byte(p + "\x00"))
		h.Write(data)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}
