package testutil_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// lockFixture is a module of two packages: b's type takes a lock in every
// method but Peek, and a's functions call it in every way LockProblems
// tells apart (A.fine in every way it lets pass).
var lockFixture = map[string]string{
	"go.mod": "module m\n\ngo 1.25\n",
	"b/b.go": `package b

import "sync"

type T struct{ mu sync.Mutex; n int }

func (t *T) Get() int { t.mu.Lock(); defer t.mu.Unlock(); return t.n }
func (t *T) Peek() int { return t.n }
func (t *T) Each(f func(int) bool) { t.mu.Lock(); defer t.mu.Unlock(); f(t.n) }
`,
	"a/a.go": `package a

import (
	"context"
	"log/slog"
	"sync"

	"m/b"
)

type A struct {
	mu     sync.Mutex
	t      *b.T
	c      chan int
	hook   func()
	cancel context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup
}

func (a *A) fine() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case a.c <- 1:
	default:
	}
	a.cancel()
	_ = a.ctx.Err()
	func() {}()
	return a.t.Peek() + len(a.c)
}

func (a *A) nested() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.t.Get()
}

func (a *A) indirect() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.viaHelper()
}

func (a *A) viaHelper() int { return a.t.Get() }

func (a *A) blocks() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.c <- 1
	<-a.c
	slog.Info("held")
	a.wg.Wait()
	a.hook()
}

func (a *A) plain() {
	a.mu.Lock()
	a.mu.Unlock()
}

func (a *A) filters() {
	a.t.Each(func(int) bool { return a.t.Peek() > 0 })
	get := func(int) bool { return a.t.Get() > 0 }
	a.t.Each(get)
}

func (a *A) allowed() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hook()
}

func (a *A) spawns() {
	a.mu.Lock()
	defer a.mu.Unlock()
	go a.viaHelper() // on a goroutine of its own, under no lock
}
`,
}

func TestLockProblems(t *testing.T) {
	dir := t.TempDir()
	for name, text := range lockFixture {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	}
	rules := testutil.LockRules{CallUnderLock: []string{"(*m/b.T).Each"}}
	got, n, err := testutil.LockProblems(filepath.Join(dir, "a"), rules)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"a.go:37:9: in A.nested, under the lock taken at line 35: a call of T.Get, which takes b.T's lock: it locks at b.go:7",
		"a.go:43:9: in A.indirect, under the lock taken at line 41: a call of A.viaHelper, which takes b.T's lock: it calls T.Get at a.go:46, which locks at b.go:7",
		"a.go:51:2: in A.blocks, under the lock taken at line 49: a channel send that can block",
		"a.go:52:2: in A.blocks, under the lock taken at line 49: a channel receive that can block",
		"a.go:53:2: in A.blocks, under the lock taken at line 49: a call of log/slog.Info, which may block or write",
		"a.go:54:2: in A.blocks, under the lock taken at line 49: a wait group's Wait",
		"a.go:55:2: in A.blocks, under the lock taken at line 49: a call of the function value a.hook, whose target the check cannot see",
		"a.go:60:2: in A.plain: an unlock that is not deferred",
		"a.go:66:11: in A.filters: the function passed to Each, which calls it under its lock, takes b.T's lock: it calls T.Get at a.go:65, which locks at b.go:7",
		"a.go:72:2: in A.allowed, under the lock taken at line 70: a call of the function value a.hook, whose target the check cannot see",
	}, got, "problems")
	assert.Equal(t, 7, n, "functions that take a lock")

	rules.Allowed = map[string]string{"a.hook": "the fixture says so"}
	got, _, err = testutil.LockProblems(filepath.Join(dir, "a"), rules)
	require.NoError(t, err)
	assert.Len(t, got, 8, "a.hook allowed: %q", got)

	rules.Order = [][2]string{{"a.A", "b.T"}}
	got, _, err = testutil.LockProblems(filepath.Join(dir, "a"), rules)
	require.NoError(t, err)
	assert.Len(t, got, 6, "A's lock, then T's, allowed: %q", got)
	assert.NotContains(t, got[0], "A.nested", "A's lock, then T's, allowed")
}
