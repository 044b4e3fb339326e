package testutil_test

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// fakeTB records a Fatalf and ends its goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// onFake runs fn with a fakeTB on a goroutine of its own, so that Fatalf
// ends that goroutine only, and returns what was recorded.
func onFake(fn func(tb testing.TB)) *fakeTB {
	tb := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb
}

func TestEventuallyReturnsWhenTheConditionHolds(t *testing.T) {
	calls := 0
	var took time.Duration
	tb := onFake(func(tb testing.TB) {
		took = testutil.Eventually(tb, 10*time.Second, "three calls", func() (bool, error) {
			calls++
			return calls == 3, errors.New("not yet")
		})
	})
	assert.Empty(t, tb.fatal, "no failure")
	assert.Equal(t, 3, calls, "asked until it held, and no more")
	assert.Less(t, took, 10*time.Second, "returned as soon as it held")
}

func TestEventuallyChecksFirstWithoutWaiting(t *testing.T) {
	calls := 0
	tb := onFake(func(tb testing.TB) {
		testutil.Eventually(tb, 0, "at once", func() (bool, error) { calls++; return true, nil })
	})
	assert.Empty(t, tb.fatal)
	assert.Equal(t, 1, calls)
}

func TestEventuallyFailsAfterTheDeadline(t *testing.T) {
	start := time.Now()
	calls := 0
	tb := onFake(func(tb testing.TB) {
		testutil.Eventually(tb, 30*time.Millisecond, "the impossible", func() (bool, error) {
			calls++
			return false, fmt.Errorf("attempt %d", calls)
		})
	})
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "waited the whole time")
	assert.Greater(t, calls, 1, "asked more than once")
	assert.Equal(t, fmt.Sprintf("the impossible: not within 30ms (last error: attempt %d)", calls), tb.fatal)
}

func TestUntil(t *testing.T) {
	calls := 0
	tb := onFake(func(tb testing.TB) {
		testutil.Until(tb, 10*time.Second, "two calls", func() bool { calls++; return calls == 2 })
	})
	assert.Empty(t, tb.fatal)
	assert.Equal(t, 2, calls)

	tb = onFake(func(tb testing.TB) {
		testutil.Until(tb, 10*time.Millisecond, "never", func() bool { return false })
	})
	assert.Equal(t, "never: not within 10ms", tb.fatal)
}
