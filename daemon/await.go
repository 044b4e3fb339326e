package daemon

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/mux"
)

// AwaitReady polls the daemon until each server in names is ready, failed
// or left idle, or until wait has passed, writing a line to out as each
// one settles and, every 10 s, one naming those still starting with their
// last stderr line. Servers still starting after wait go on; that is not
// an error.
func (c *Client) AwaitReady(ctx context.Context, names []string, wait time.Duration, out io.Writer) error {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	waiting := slices.Clone(names)
	for reported := time.Duration(0); ; {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		elapsed := time.Since(start).Round(time.Second)
		var stderr []string
		waiting, stderr = settle(out, st, waiting, elapsed)
		switch {
		case len(waiting) == 0:
			return nil
		case elapsed >= wait:
			fmt.Fprintf(out, "still starting after %s: %s (they go on; mcpmux status shows them)\n", elapsed, strings.Join(waiting, ", "))
			return nil
		case elapsed-reported >= 10*time.Second:
			reported = elapsed
			line := fmt.Sprintf("still starting (%s): %s", elapsed, strings.Join(waiting, ", "))
			if len(stderr) > 0 {
				line += "; last stderr: " + strings.Join(stderr, "; ")
			}
			fmt.Fprintln(out, line)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// settle writes a line for each server of waiting that st shows settled,
// and returns those still starting, with their last stderr lines.
func settle(out io.Writer, st Status, waiting []string, elapsed time.Duration) (left, stderr []string) {
	left = slices.DeleteFunc(waiting, func(name string) bool {
		i := slices.IndexFunc(st.Servers, func(s mux.Status) bool { return s.Name == name })
		if i < 0 {
			return false
		}
		s := st.Servers[i]
		switch s.State {
		case mux.StateReady:
			fmt.Fprintf(out, "ready: %s (%s)\n", name, elapsed)
		case mux.StateFailed:
			exit := s.LastExit
			if exit == "" {
				exit = "-"
			}
			fmt.Fprintf(out, "failed: %s: %s (mcpmux logs %s)\n", name, exit, name)
		case mux.StateIdle:
			fmt.Fprintf(out, "not started: %s starts with its first session\n", name)
		default:
			if len(s.Stderr) > 0 {
				stderr = append(stderr, name+": "+s.Stderr[len(s.Stderr)-1])
			}
			return false
		}
		return true
	})
	return left, stderr
}
