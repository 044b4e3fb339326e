package mux

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRootsFolder feeds the lobby's reading of a roots/list answer any
// result: the folder it takes is an existing folder of this machine,
// absolute and clean, named by one of the answer's file:// roots, or none.
func FuzzRootsFolder(f *testing.F) {
	for _, s := range []string{
		`{"roots":[{"uri":"file:///tmp","name":"t"}]}`,
		`{"roots":[{"uri":"https://example.com/x"},{"uri":"file:///"}]}`,
		`{"roots":[{"uri":"file://localhost/tmp"}]}`,
		`{"roots":[{"uri":"file://otherhost/tmp"}]}`,
		`{"roots":[{"uri":"file:/tmp/../tmp/"}]}`,
		`{"roots":[{"uri":"file:tmp"},{"uri":"file:///tmp/%2e%2e/etc"}]}`,
		`{"roots":[{"uri":"file:///no/such/folder"},{"uri":"file:///tmp%00"}]}`,
		`{"roots":[{"uri":"file:///etc/hostname"}]}`,
		`{"roots":{}}`, `{"roots":null}`, `[]`, `null`, ``, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, result []byte) {
		dir := rootsFolder(result)
		if dir == "" {
			return
		}
		if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
			t.Fatalf("took %q, not an absolute, clean path", dir)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("took %q, not a folder: %v", dir, err)
		}
		if !namedLocally(result, dir) {
			t.Fatalf("took %q, which no local file:// root of %s names", dir, result)
		}
	})
}

// namedLocally: one of the roots of result is a file URI of this machine
// naming dir.
func namedLocally(result []byte, dir string) bool {
	var res struct {
		Roots []struct {
			URI string `json:"uri"`
		} `json:"roots"`
	}
	json.Unmarshal(result, &res)
	for _, r := range res.Roots {
		u, err := url.Parse(r.URI)
		local := u != nil && (u.Host == "" || strings.EqualFold(u.Host, "localhost"))
		if err == nil && strings.EqualFold(u.Scheme, "file") && local && filepath.Clean(u.Path) == dir {
			return true
		}
	}
	return false
}
