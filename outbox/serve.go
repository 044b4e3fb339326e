package outbox

import "sync"

// Serve puts the queue in the mode where it runs its writer goroutine
// itself, and only while there is something to write that Flush may not
// write on its caller's goroutine: the goroutine starts when frames wait
// for it and ends once the queue is empty, so an idle connection costs no
// goroutine. fail is called once, on the writer goroutine, with the first
// write error; no writer starts after it. Serve is called once, before the
// queue is used, in place of Run. Drain, on the owner's goroutine, writes
// what is left; Stop and Wait end the mode.
func (q *Queue) Serve(fail func(error)) {
	if fail == nil {
		panic("outbox: Serve needs a fail function")
	}
	q.fail = fail
}

// served is the state of Serve's writer goroutine. Lock order: a Queue's
// lock, then its served's.
type served struct {
	mu      sync.Mutex
	up      bool // the writer goroutine runs
	stopped bool // no writer starts again (Stop, or a write failed)
	wg      sync.WaitGroup
}

// claim reports whether the caller is to start the writer goroutine, and
// counts it in when so.
func (w *served) claim() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.up || w.stopped {
		return false
	}
	w.up = true
	w.wg.Add(1)
	return true
}

// end marks the writer goroutine gone; stop also keeps another from
// starting.
func (w *served) end(stop bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.up = false
	w.stopped = w.stopped || stop
}

// Stop makes sure no writer goroutine starts again. One that is writing
// goes on until the queue is empty or its write fails: the owner ends it
// by closing the connection, and waits for it with Wait.
func (q *Queue) Stop() {
	q.served.mu.Lock()
	defer q.served.mu.Unlock()
	q.served.stopped = true
}

// Wait waits for the writer goroutine Serve's queue started, if any; it is
// called after Stop.
func (q *Queue) Wait() { q.served.wg.Wait() }

// spawn starts the writer goroutine unless it runs or the queue stopped.
func (q *Queue) spawn() {
	if q.served.claim() {
		go q.serveWrites()
	}
}

// serveWrites is the writer goroutine of Serve's mode: it writes until
// nothing is left for it.
func (q *Queue) serveWrites() {
	defer q.served.wg.Done()
	for {
		if err := q.writeQueued(); err != nil {
			q.served.end(true)
			q.fail(err)
			return
		}
		if q.idle() {
			return
		}
	}
}

// idle ends the writer goroutine's life when nothing is left for it: the
// queue is empty, closed, or a Flush holds the Writer (its end starts a
// writer again for whatever it leaves). The check and the end are one step
// under q.mu, against which frames are queued, so none is left without a
// writer.
func (q *Queue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.writing && !q.closed && (len(q.frames) > 0 || q.owed) {
		return false
	}
	q.served.end(false)
	return true
}
