package mux

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEventLogKeepsTheLatestLines(t *testing.T) {
	l := newEventLog()
	for i := range eventLogLines + 10 {
		l.add(fmt.Sprint(i))
	}
	got := l.recent()
	assert.Equal(t, eventLogLines, len(got))
	assert.Equal(t, []string{"10", "11"}, got[:2], "the oldest are forgotten")
	assert.Equal(t, fmt.Sprint(eventLogLines+9), got[len(got)-1])
}

func TestEventLogFollowers(t *testing.T) {
	l := newEventLog()
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	var wg sync.WaitGroup
	wg.Go(func() {
		l.follow(ctx, func(s string) error {
			got = append(got, s)
			if len(got) == 3 {
				cancel()
			}
			return nil
		})
	})
	eventually(t, "the follower registered", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.followers) == 1
	})
	for _, s := range []string{"a", "b", "c"} {
		l.add(s)
	}
	wg.Wait()
	assert.Equal(t, []string{"a", "b", "c"}, got)
}

func TestTeeHandlerRecordsServerLines(t *testing.T) {
	l := newEventLog()
	var sb strings.Builder
	log := slog.New(newTeeHandler(slog.NewTextHandler(&sb, nil), l)).With("server", "x")
	log.Info("server started", "pid", 7)
	log.Debug("not kept")
	lines := l.recent()
	assert.Equal(t, 1, len(lines))
	assert.Contains(t, lines[0], `msg="server started" server=x pid=7`)
	assert.Contains(t, sb.String(), "server started", "the daemon's log still gets it")
}
