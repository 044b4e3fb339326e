package testutil_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// TestBufferConcurrentUse writes from several goroutines while reading;
// under -race an unlocked buffer fails here.
func TestBufferConcurrentUse(t *testing.T) {
	var b testutil.Buffer
	assert.Empty(t, b.String(), "the zero value is empty")
	const writers, lines = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(&b, "w%d line %d\n", w, i)
			}
		})
	}
	for range 50 {
		s := b.String()
		assert.True(t, s == "" || strings.HasSuffix(s, "\n"), "reads see whole writes only")
	}
	wg.Wait()
	got := b.String()
	assert.Equal(t, writers*lines, strings.Count(got, "\n"))
	for w := range writers {
		assert.Contains(t, got, fmt.Sprintf("w%d line %d\n", w, lines-1))
	}
}
