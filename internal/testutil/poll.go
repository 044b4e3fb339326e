package testutil

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually asks its condition again.
const pollEvery = 5 * time.Millisecond

// Eventually asks cond every few milliseconds until it returns true, and
// returns how long that took. If within passes first it fails tb with what
// and the last error cond returned, if any: the error says why the
// condition does not hold yet. The first check is immediate.
func Eventually(tb testing.TB, within time.Duration, what string, cond func() (bool, error)) time.Duration {
	tb.Helper()
	start := time.Now()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			if err != nil {
				tb.Fatalf("%s: not within %v (last error: %v)", what, within, err)
			} else {
				tb.Fatalf("%s: not within %v", what, within)
			}
			return time.Since(start)
		}
		<-tick.C
	}
}

// Until is Eventually for a condition with no error to report.
func Until(tb testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	return Eventually(tb, within, what, func() (bool, error) { return cond(), nil })
}
