package streamable

import "time"

// SetHeaderDelay sets how long a POST's headers wait for its first event,
// for the test, and puts it back at cleanup.
func SetHeaderDelay(cleanup func(func()), d time.Duration) {
	old := headerDelay
	headerDelay = d
	cleanup(func() { headerDelay = old })
}
