package outbox

// WriterUp reports whether Serve's writer goroutine runs.
func (q *Queue) WriterUp() bool {
	q.served.mu.Lock()
	defer q.served.mu.Unlock()
	return q.served.up
}
