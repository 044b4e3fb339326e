package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/mcpmux/mcpmux/mux"
)

// exitWhenIdle calls stop once no server has had a session for idle.
func exitWhenIdle(ctx context.Context, servers func() []mux.Server, idle time.Duration, stop func(), log *slog.Logger) {
	tick := time.NewTicker(max(min(idle/4, time.Second), time.Millisecond))
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, h := range servers() {
			if h.Status().Sessions > 0 {
				last = time.Now()
				break
			}
		}
		if time.Since(last) >= idle {
			log.Info("no sessions: exiting", "idle_exit", idle)
			stop()
			return
		}
	}
}
