package outbox

// WriterUp reports whether Serve's writer goroutine runs.
func (q *Queue) WriterUp() bool {
	q.served.mu.Lock()
	defer q.served.mu.Unlock()
	return q.served.up
}

// TakeTurn is the writer goroutine's attempt at the turn (takeTurn, not
// draining): busy while a Flush or Drain holds it.
func (q *Queue) TakeTurn() (busy bool) {
	_, _, busy = q.takeTurn(false)
	return busy
}

// DrainWaits reports whether Drain waits for the turn's holder.
func (q *Queue) DrainWaits() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.drainer
}
