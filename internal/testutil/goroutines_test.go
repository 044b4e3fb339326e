package testutil_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

func TestGoroutineDocProblems(t *testing.T) {
	const doc = "// Package a owns a.\n//\n// # Goroutines\n//\n// T.Run and start, and pool.Serve.\n//\n// # Locks\n//\n// helper, T.later.\npackage a\n"
	tests := []struct {
		name   string
		files  map[string]string
		want   []string
		places int
	}{
		{
			name: "every one named",
			files: map[string]string{
				"doc.go": doc,
				"a.go": `package a
import ("context"; "sync"; "time")
type T struct{ wg sync.WaitGroup }
func (t *T) Run(ctx context.Context) {
	go func() {}()
	t.wg.Go(func() {})
	context.AfterFunc(ctx, func() {})
}
func start() { time.AfterFunc(time.Second, func() { go start() }) }
type pool[K any] struct{}
func (p *pool[K]) Serve() { go start() }
func quiet() { start() }
`,
				"a_test.go": "package a\nfunc helper() { go quiet() }\n",
				"x.go":      "//go:build ignore\n\npackage a\nfunc ignored() { go quiet() }\n",
			},
			places: 6,
		},
		{
			name: "some missing",
			files: map[string]string{
				"doc.go": doc,
				"a.go": `package a
import ("sync"; "time")
type T struct{}
func (T) later() { time.AfterFunc(time.Second, func() {}) }
func helper(g *sync.WaitGroup) { g.Go(func() {}) }
func Start() { go func() {}() }
var timer = time.AfterFunc(time.Hour, func() {})
func (T) Run() {}
`,
			},
			want: []string{
				"a.go:4:20: time.AfterFunc call in T.later: add T.later to the Goroutines section of the package doc (what it runs, who waits for it)",
				"a.go:5:34: g.Go call in helper: add helper to the Goroutines section of the package doc (what it runs, who waits for it)",
				"a.go:6:16: go statement in Start: add Start to the Goroutines section of the package doc (what it runs, who waits for it)",
				"a.go:7:13: time.AfterFunc call in timer: add timer to the Goroutines section of the package doc (what it runs, who waits for it)",
			},
			places: 4,
		},
		{
			name: "a name inside a longer one",
			files: map[string]string{
				"doc.go": "// Package a owns a.\n//\n// # Goroutines\n//\n// Restart and runs.\npackage a\n",
				"a.go":   "package a\nfunc Run() { go Run() }\nfunc Restart() { go Run() }\n",
			},
			want: []string{
				"a.go:2:14: go statement in Run: add Run to the Goroutines section of the package doc (what it runs, who waits for it)",
			},
			places: 2,
		},
		{
			name: "a name the package lacks",
			files: map[string]string{
				"doc.go": "// Package a owns a.\n//\n// # Goroutines\n//\n// T.Run, T.gone, T.mu, I.M, I.N, E.Any, other.Thing, and t.Run.\npackage a\n",
				"a.go": `package a
import "sync"
type T struct{ mu sync.Mutex }
func (t *T) Run() { go t.Run() }
type I interface{ M() }
type E struct{ sync.Mutex }
`,
			},
			want: []string{
				".: the Goroutines section of the package doc names T.gone, which the package does not have",
				".: the Goroutines section of the package doc names I.N, which the package does not have",
			},
			places: 1,
		},
		{
			name: "no section",
			files: map[string]string{
				"doc.go": "// Package a owns a.\npackage a\n",
				"a.go":   "package a\nfunc Run() { go Run() }\n",
			},
			want:   []string{`.: the package doc has no "# Goroutines" section to name where goroutines and timers start (1 places)`},
			places: 1,
		},
		{
			name:   "no section, and no goroutine",
			files:  map[string]string{"doc.go": "// Package a owns a.\npackage a\n", "a.go": "package a\nfunc Run() {}\n"},
			places: 0,
		},
		{
			name:   "no doc",
			files:  map[string]string{"a.go": "package a\nfunc Run() { go Run() }\n"},
			want:   []string{".: the package has no doc comment"},
			places: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
			}
			t.Chdir(dir)
			got, n, err := testutil.GoroutineDocProblems(".")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "problems")
			assert.Equal(t, tt.places, n, "places found")
		})
	}
}

func TestGoroutineDocProblemsOfAMissingFolder(t *testing.T) {
	_, _, err := testutil.GoroutineDocProblems(filepath.Join(t.TempDir(), "none"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
